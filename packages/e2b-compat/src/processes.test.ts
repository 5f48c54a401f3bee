// Signals sent to a command that compute has not started in the sandbox yet:
// the kill must still end it (a lost kill left the SDK's wait() hanging to its
// 60 s deadline in CI).
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ComputePort, ExecEvent } from "./compute-port.ts";
import { type ProcEvent, ProcessTable } from "./processes.ts";

/** A sandbox where a command starts startDelayMs after its exec is called and runs until its mark is signalled. */
function slowStartingSandbox(startDelayMs: number) {
  const running = new Map<string, () => void>();
  let scans = 0;
  const port = {
    async *exec(input: { args: string[]; env: Record<string, string>; signal?: AbortSignal }) {
      const mark = Object.entries(input.env).find(([k]) => k === "PLATFORM_E2B_PROCESS");
      if (!mark) {
        // The signal script: $1 is the mark, exit 0 only when something was signalled.
        scans++;
        const kill = running.get(input.args[3] ?? "");
        kill?.();
        yield { type: "completed", exitCode: kill ? 0 : 1, cancelled: false } satisfies ExecEvent;
        return;
      }
      const key = `${mark[0]}=${mark[1]}`;
      await new Promise((r) => setTimeout(r, startDelayMs));
      const killed = new Promise<void>((resolve) => running.set(key, resolve));
      const aborted = new Promise<never>((_, reject) =>
        input.signal?.addEventListener("abort", () => reject(new Error("cancelled"))),
      );
      await Promise.race([killed, aborted]);
      running.delete(key);
      yield { type: "completed", exitCode: 137, cancelled: false } satisfies ExecEvent;
    },
  };
  return { port: port as unknown as ComputePort, scans: () => scans };
}

function ended(start: (l: (e: ProcEvent) => void) => number) {
  let pid = 0;
  const end = new Promise<ProcEvent>((resolve) => {
    pid = start((e) => {
      if (e.type === "end") resolve(e);
    });
  });
  return { pid, end };
}

test("a kill sent before the command is running in the sandbox is repeated until it reaches it", async () => {
  const sandbox = slowStartingSandbox(150);
  const table = new ProcessTable(sandbox.port, "sbx");
  const { pid, end } = ended((l) => table.start({ cmd: "/bin/sh", args: ["-c", "sleep 60"], envs: {} }, undefined, l));
  await table.signal({ pid }, "KILL");
  const result = await Promise.race([end, new Promise((r) => setTimeout(() => r("still running"), 3000))]);
  assert.deepEqual(result, { type: "end", exitCode: -1, status: "signal: killed", error: "signal: killed" });
  assert.ok(sandbox.scans() > 1, `the first scan found nothing, then it looked again (${sandbox.scans()} scans)`);
});

test("a signal stops looking once the command has ended without it", async () => {
  const sandbox = slowStartingSandbox(100);
  const table = new ProcessTable(sandbox.port, "sbx");
  const { pid } = ended((l) => table.start({ cmd: "/bin/true", args: [], envs: {} }, undefined, l));
  const signalled = table.signal({ pid }, "TERM");
  // The command's exec is cancelled from outside (compute ended it): the table marks it ended.
  table.killAll();
  await Promise.race([
    signalled,
    new Promise((_, reject) => setTimeout(() => reject(new Error("signal kept looking")), 3000)),
  ]);
});
