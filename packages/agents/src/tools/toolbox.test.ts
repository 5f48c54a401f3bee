import assert from "node:assert/strict";
import { test } from "node:test";
import type { ExecResult, Workspace } from "../domain/ports.ts";
import { clip, Toolbox } from "./toolbox.ts";

/** A workspace whose every call first tells `asked` (the run's sandbox owner would get the sandbox then). */
function fakeWorkspace(exec: (signal: AbortSignal) => Promise<ExecResult>, asked: () => void = () => {}): Workspace {
  return {
    exec: async (_cmd, _args, o) => {
      asked();
      return exec(o.signal);
    },
    readFile: async () => {
      asked();
      return { data: Buffer.from("x".repeat(50_000)), totalSize: 50_000, eof: true };
    },
    writeFile: async (_path, data) => {
      asked();
      return data.length;
    },
    listFiles: async () => {
      asked();
      return { entries: [], truncated: false };
    },
  };
}
const ok = (stdout: string): ExecResult => ({
  exitCode: 0,
  stdout,
  stderr: "",
  stdoutBytes: Buffer.byteLength(stdout),
  stderrBytes: 0,
  cancelled: false,
});
const never = () => new AbortController().signal;

test("the sandbox is asked for only by calls that need it", async () => {
  let created = 0;
  const box = new Toolbox({ timeoutMs: 1000, outputLimitBytes: 1024 });
  const sandbox = fakeWorkspace(
    async () => ok("hi"),
    () => created++,
  );
  const bad = await box.run({ id: "1", name: "bash", input: {} }, sandbox, never());
  assert.equal(bad.isError, true);
  const unknown = await box.run({ id: "2", name: "rm_rf", input: {} }, sandbox, never());
  assert.match(unknown.content, /unknown tool/);
  assert.equal(created, 0, "invalid input and unknown tools need no sandbox");
  const good = await box.run({ id: "3", name: "bash", input: { command: "echo hi" } }, sandbox, never());
  assert.deepEqual(JSON.parse(good.content), { exitCode: 0, stdout: "hi" });
  assert.equal(created, 1);
});

test("a tool past its timeout yields an error result and its call is aborted", async () => {
  let aborted = false;
  const box = new Toolbox({ timeoutMs: 50, outputLimitBytes: 1024 });
  const workspace = fakeWorkspace(
    (signal) =>
      new Promise((_, reject) =>
        signal.addEventListener("abort", () => {
          aborted = true;
          reject(new Error("aborted"));
        }),
      ),
  );
  const result = await box.run({ id: "1", name: "bash", input: { command: "sleep 100" } }, workspace, never());
  assert.equal(result.isError, true);
  assert.match(JSON.parse(result.content).error, /timed out/);
  assert.equal(aborted, true);
});

test("a cancelled run's tool call throws instead of producing a result", async () => {
  const box = new Toolbox({ timeoutMs: 10_000, outputLimitBytes: 1024 });
  const workspace = fakeWorkspace(() => new Promise(() => {}));
  const run = new AbortController();
  const pending = box.run({ id: "1", name: "bash", input: { command: "x" } }, workspace, run.signal);
  run.abort(new Error("cancelled"));
  await assert.rejects(pending, /cancelled/);
});

test("file output given to the model is capped", async () => {
  const box = new Toolbox({ timeoutMs: 1000, outputLimitBytes: 4096 });
  const workspace = fakeWorkspace(async () => ok(""));
  const result = await box.run({ id: "1", name: "read_file", input: { path: "big" } }, workspace, never());
  const parsed = JSON.parse(result.content);
  assert.equal(parsed.content.length, 4096);
  assert.equal(parsed.truncated, true);
  assert.equal(parsed.totalSize, 50_000);
});

test("clip cuts UTF-8 on a character boundary", () => {
  assert.equal(clip("héllo", 2), "h");
  assert.equal(clip("héllo", 3), "hé");
  assert.equal(clip("abc", 10), "abc");
});
