// Exec input's rules (issue 27) without sandboxes: the channel's bounds and a driver without exec input.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { Code, ComputeReason, type PlatformError } from "@platform/errors";
import type { SandboxDriver } from "../driver.ts";
import { MemorySandboxStore } from "../store/sandbox-store.ts";
import { ComputeDomain } from "./compute-domain.ts";
import { ExecInputChannel, ExecInputs, MAX_INPUT_BUFFERED_BYTES } from "./exec-input.ts";

const rejectsWith = (f: () => unknown, code: Code, reason: string) =>
  assert.throws(f, (e: PlatformError) => e.code === code && e.reason === reason);

test("a channel hands over chunks in order, then null after eof; holds at most 1 MiB unread", async () => {
  const c = new ExecInputChannel(false);
  c.push(new Uint8Array(MAX_INPUT_BUFFERED_BYTES - 1), false);
  rejectsWith(() => c.push(new Uint8Array(2), false), Code.ResourceExhausted, ComputeReason.stdinBufferFull);
  assert.equal((await c.read())?.length, MAX_INPUT_BUFFERED_BYTES - 1);
  c.push(new TextEncoder().encode("a"), false);
  const pending = c.read();
  assert.equal(new TextDecoder().decode((await pending) ?? undefined), "a");
  const waiting = c.read();
  c.push(new TextEncoder().encode("b"), true);
  assert.equal(new TextDecoder().decode((await waiting) ?? undefined), "b");
  assert.equal(await c.read(), null);
  rejectsWith(() => c.push(new Uint8Array(1), false), Code.FailedPrecondition, ComputeReason.stdinClosed);
});

test("once the driver ends a channel, input and resizes are refused and a waiting read gets null", async () => {
  const c = new ExecInputChannel(true);
  const sizes: number[] = [];
  c.onResize((s) => sizes.push(s.rows));
  c.resize({ rows: 5, cols: 6 });
  const waiting = c.read();
  c.end();
  assert.equal(await waiting, null);
  rejectsWith(() => c.push(new Uint8Array(1), false), Code.FailedPrecondition, ComputeReason.stdinClosed);
  rejectsWith(() => c.resize({ rows: 7, cols: 8 }), Code.FailedPrecondition, ComputeReason.stdinClosed);
  assert.deepEqual(sizes, [5]);
});

test("a resize answers only once the driver applied it: input sent after the answer meets the new size", async () => {
  const c = new ExecInputChannel(true);
  let apply!: () => void;
  c.onResize(() => new Promise<void>((r) => (apply = r)));
  let answered = false;
  const resized = c.resize({ rows: 45, cols: 132 }).then(() => (answered = true));
  await new Promise((r) => setImmediate(r));
  assert.equal(answered, false, "answered before the driver applied the size");
  apply();
  await resized;
  assert.equal(answered, true);
});

test("exec ids are per sandbox: the same id in another sandbox is another exec; closing forgets it", () => {
  const inputs = new ExecInputs();
  const [a, b, id] = [randomUUID(), randomUUID(), randomUUID()];
  const one = inputs.open(a, id, false);
  assert.throws(
    () => inputs.open(a.toUpperCase(), id, false),
    (e: PlatformError) => e.code === Code.AlreadyExists,
  );
  assert.equal(inputs.get(b, id), undefined);
  one.close();
  assert.equal(inputs.get(a, id), undefined);
});

test("a driver without exec input (Kubernetes) refuses stdin and terminals with FAILED_PRECONDITION", async () => {
  const driver = { name: "kubernetes", onPhaseChange: () => () => {} } as unknown as SandboxDriver;
  const domain = new ComputeDomain({
    driver,
    store: new MemorySandboxStore(),
    defaults: { image: "x", storageClass: "", workspaceSize: "1Gi" },
  });
  for (const extra of [{ stdin: true }, { terminal: { rows: 10, cols: 10 } }]) {
    await assert.rejects(
      domain.execCommand({ sandboxId: randomUUID(), command: "cat", execId: randomUUID(), ...extra }).next(),
      (e: PlatformError) => e.code === Code.FailedPrecondition && e.reason === ComputeReason.execInputUnsupported,
    );
  }
});
