import assert from "node:assert/strict";
import { test } from "node:test";
import type { EventType, SessionEvent } from "../domain/model.ts";
import { historyOf, openCallsOf, toolUseContent } from "./history.ts";

let seq = 0;
const ev = (type: EventType, content = "", toolUseId = "", isError = false): SessionEvent => ({
  seq: ++seq,
  type,
  content,
  tokensIn: 0,
  tokensOut: 0,
  toolUseId,
  isError,
  createdAt: new Date(0),
});

test("text fragments and tool calls of one model turn join into one assistant message", () => {
  const history = historyOf([
    ev("user", "hi"),
    ev("text", "Let "),
    ev("text", "me check."),
    ev("tool_use", toolUseContent("bash", { command: "ls" }), "t1"),
    ev("tool_result", '{"exitCode":0}', "t1"),
    ev("text", "Done."),
    ev("done"),
    ev("user", "thanks"),
  ]);
  assert.deepEqual(history, [
    { role: "user", content: "hi" },
    { role: "assistant", content: "Let me check.", toolCalls: [{ id: "t1", name: "bash", input: { command: "ls" } }] },
    { role: "tool", toolUseId: "t1", content: '{"exitCode":0}', isError: false },
    { role: "assistant", content: "Done.", toolCalls: [] },
    { role: "user", content: "thanks" },
  ]);
});

test("a tool call without a result (cancelled run) gets an error result", () => {
  const history = historyOf([
    ev("user", "go"),
    ev("tool_use", toolUseContent("bash", { command: "sleep 99" }), "t9"),
    ev("error", "cancelled"),
    ev("user", "again"),
  ]);
  assert.deepEqual(history[2], {
    role: "tool",
    toolUseId: "t9",
    content: '{"error":"the tool call did not complete"}',
    isError: true,
  });
  assert.deepEqual(history[3], { role: "user", content: "again" });
});

test("client messages pass through; runs that produced nothing leave no empty assistant turn", () => {
  const history = historyOf([
    ev("user", "a"),
    ev("error", "unreachable"),
    ev("user", "b"),
    ev("assistant", "prior answer"),
    ev("tool", "client result", "c1", true),
  ]);
  assert.deepEqual(history, [
    { role: "user", content: "a" },
    { role: "user", content: "b" },
    { role: "assistant", content: "prior answer", toolCalls: [] },
    { role: "tool", toolUseId: "c1", content: "client result", isError: true },
  ]);
});

test("sandbox events and tool output are for clients: the model's history is the same without them", () => {
  const turn = (extra: SessionEvent[]) =>
    historyOf([
      ev("user", "read it"),
      ev("text", "Reading."),
      ev("tool_use", toolUseContent("read_file", { path: "a.txt" }), "t1"),
      ...extra,
      ev("tool_result", '{"path":"a.txt","content":"x"}', "t1"),
      ev("text", "It says x."),
      ev("done"),
    ]);
  const withEvents = turn([
    ev("sandbox_paused", '{"sandboxId":"s1"}', "t1"),
    ev("sandbox_resumed", '{"sandboxId":"s1"}', "t1"),
    ev("sandbox_replaced", '{"previousSandboxId":"s1","sandboxId":"s2","reason":"failed"}', "t1"),
    ev("tool_output", '{"stdout":"x"}', "t1"),
  ]);
  assert.deepEqual(withEvents, turn([]));
  assert.deepEqual(
    withEvents.map((m) => m.role),
    ["user", "assistant", "tool", "assistant"],
  );
});

test("a pause (requires_action) leaves its calls open for the resumed run's results; openCallsOf lists them in order", () => {
  const paused = [
    ev("user", "go"),
    { ...ev("tool_use", toolUseContent("bash", { command: "a" }), "a"), runId: "r1" },
    { ...ev("tool_use", toolUseContent("list_files", { path: "." }), "b"), runId: "r1" },
    { ...ev("tool_result", '{"exitCode":0}', "a"), runId: "r1" },
    { ...ev("requires_action", '{"calls":[]}'), runId: "r1" },
  ];
  assert.deepEqual(
    openCallsOf(paused, "r1").map((c) => [c.id, c.name]),
    [["b", "list_files"]],
  );
  assert.deepEqual(openCallsOf(paused, "other"), []);
  const history = historyOf([...paused, ev("tool_result", '{"error":"denied"}', "b", true), ev("text", "ok")]);
  assert.deepEqual(
    history.map((m) => (m.role === "tool" ? [m.role, m.toolUseId, m.isError] : [m.role])),
    [["user"], ["assistant"], ["tool", "a", false], ["tool", "b", true], ["assistant"]],
    "the denial is the call's only result: no 'did not complete' added at the pause",
  );
});
