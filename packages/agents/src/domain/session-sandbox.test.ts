import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ComputeReason, PlatformError } from "@platform/errors";
import type { Session } from "./model.ts";
import type { Sandboxes, SandboxState } from "./ports.ts";
import { type SandboxEvent, SessionSandbox } from "./session-sandbox.ts";

/** Sandboxes whose states the test sets; creates number them sbx-1, sbx-2, ... */
function fakes(states: Map<string, SandboxState>, options: { resumes?: boolean } = {}) {
  let created = 0;
  const row: { sandboxId?: string } = {};
  const calls: string[] = [];
  const sandboxes = {
    create: async () => {
      const id = `sbx-${++created}`;
      states.set(id, { kind: "running" });
      calls.push(`create ${id}`);
      return id;
    },
    state: async (id: string) => states.get(id) ?? { kind: "gone", why: "not_found" },
    resume: async (id: string) => {
      calls.push(`resume ${id}`);
      if (options.resumes === false) {
        states.set(id, { kind: "gone", why: "destroyed" });
        return false;
      }
      states.set(id, { kind: "running" });
      return true;
    },
    readFile: async (id: string) => {
      calls.push(`read ${id}`);
      if (states.get(id)?.kind === "gone") throw goneError();
      return { data: Buffer.from(id), totalSize: id.length, eof: true };
    },
  } as unknown as Sandboxes;
  const store = {
    getSession: async () => ({ id: "s", orgId: "o", sandboxId: row.sandboxId }) as Session,
    setSandbox: async (_session: string, id: string) => {
      row.sandboxId = id;
    },
  };
  return { sandboxes, store, row, calls };
}

/** Compute's answer to a call on a FAILED or DESTROYED sandbox. */
function goneError(): PlatformError {
  return new PlatformError(Code.FailedPrecondition, ComputeReason.sandboxNotRunnable, "sandbox is not runnable");
}

const never = new AbortController().signal;

test("a run finding its sandbox PAUSED records paused then resumed and keeps the sandbox", async () => {
  const states = new Map<string, SandboxState>([["old", { kind: "paused" }]]);
  const { sandboxes, store, calls } = fakes(states);
  const events: SandboxEvent[] = [];
  const owner = new SessionSandbox(
    store,
    sandboxes,
    { orgId: "o", id: "s", sandboxId: "old" },
    {
      observe: true,
      onEvent: (e) => events.push(e),
    },
  );
  await owner.readFile("a", 10, never);
  assert.deepEqual(events, [
    { type: "sandbox_paused", sandboxId: "old" },
    { type: "sandbox_resumed", sandboxId: "old" },
  ]);
  assert.deepEqual(calls, ["resume old", "read old"]);
  await owner.readFile("a", 10, never);
  assert.equal(events.length, 2, "a running sandbox: nothing more");
});

test("a resume that finds the sandbox destroyed meanwhile records paused then replaced", async () => {
  const states = new Map<string, SandboxState>([["old", { kind: "paused" }]]);
  const { sandboxes, store, row } = fakes(states, { resumes: false });
  const events: SandboxEvent[] = [];
  const owner = new SessionSandbox(
    store,
    sandboxes,
    { orgId: "o", id: "s", sandboxId: "old" },
    { observe: true, onEvent: (e) => events.push(e) },
  );
  await owner.readFile("a", 10, never);
  assert.deepEqual(events, [
    { type: "sandbox_paused", sandboxId: "old" },
    { type: "sandbox_replaced", previousSandboxId: "old", sandboxId: "sbx-1", reason: "destroyed" },
  ]);
  assert.equal(row.sandboxId, "sbx-1", "the session names the new sandbox");
});

test("a gone sandbox another owner already replaced is adopted, not replaced twice", async () => {
  const states = new Map<string, SandboxState>([
    ["old", { kind: "gone", why: "failed" }],
    ["theirs", { kind: "running" }],
  ]);
  const { sandboxes, store, row, calls } = fakes(states);
  row.sandboxId = "theirs";
  const events: SandboxEvent[] = [];
  const owner = new SessionSandbox(
    store,
    sandboxes,
    { orgId: "o", id: "s", sandboxId: "old" },
    { observe: true, onEvent: (e) => events.push(e) },
  );
  await owner.readFile("a", 10, never);
  assert.deepEqual(events, [
    { type: "sandbox_replaced", previousSandboxId: "old", sandboxId: "theirs", reason: "failed" },
  ]);
  assert.deepEqual(calls, ["read theirs"], "no CreateSandbox");
});

test("a session's first sandbox is created without an event; a file owner replaces on compute's word only", async () => {
  const states = new Map<string, SandboxState>();
  const { sandboxes, store, calls } = fakes(states);
  const events: SandboxEvent[] = [];
  const first = new SessionSandbox(
    store,
    sandboxes,
    { orgId: "o", id: "s" },
    { observe: true, onEvent: (e) => events.push(e) },
  );
  await first.readFile("a", 10, never);
  assert.deepEqual(events, []);
  assert.deepEqual(calls, ["create sbx-1", "read sbx-1"]);

  // A file call's owner does not ask first: the call fails, then a new sandbox serves it.
  states.set("sbx-1", { kind: "gone", why: "failed" });
  calls.length = 0;
  const files = new SessionSandbox(store, sandboxes, { orgId: "o", id: "s", sandboxId: "sbx-1" }, { observe: false });
  const read = await files.use((id) => sandboxes.readFile(id, "a", 10, never));
  assert.equal(Buffer.from(read.data).toString(), "sbx-2");
  assert.deepEqual(calls, ["read sbx-1", "create sbx-2", "read sbx-2"]);
});
