import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import type { EnsureReadyResult, ScaleState } from "../controller/controller.ts";
import { TenantUnavailableError, TenantWaker } from "./waker.ts";

const T = "0a1b2c3d-0000-4000-8000-000000000001";

function fakes(state: ScaleState = "scaled-up") {
  const log: string[] = [];
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const controller = {
    ensureReady: async (): Promise<EnsureReadyResult> => {
      log.push("ensure");
      await gate;
      return { deployName: "runtime-t-0a1b2c3d", scaleState: state };
    },
    endpoint: async () => "http://127.0.0.1:1",
  };
  const timeouts: number[] = [];
  let reachable = true;
  const waitReachable = async (_url: string, ms: number) => {
    timeouts.push(ms);
    return reachable;
  };
  return {
    controller,
    waitReachable,
    // A still clock: the whole budget is left for the reachability wait.
    now: () => 0,
    log,
    timeouts,
    release,
    setReachable: (v: boolean) => (reachable = v),
  };
}

describe("TenantWaker", () => {
  test("a cold tenant waits for reachability with the spec's 10 s bound", async () => {
    const f = fakes("scaled-up");
    f.release();
    const w = new TenantWaker(f);
    assert.deepEqual(await w.target(T, T), { deployName: "runtime-t-0a1b2c3d", url: "http://127.0.0.1:1" });
    assert.deepEqual(f.timeouts, [10_000]);
  });

  test("a running tenant is used without waiting; a wake always waits", async () => {
    const f = fakes("running");
    f.release();
    const w = new TenantWaker(f);
    await w.target(T, T);
    assert.deepEqual(f.timeouts, []);
    await w.wake(T, T);
    assert.deepEqual(f.timeouts, [10_000]);
  });

  test("concurrent requests share one EnsureReady; past the bound they fail at once", async () => {
    const f = fakes();
    const w = new TenantWaker({ ...f, maxWaitersPerTenant: 3 });
    const waiting = [w.target(T, T), w.target(T, T), w.target(T, T)];
    await assert.rejects(w.target(T, T), (e) => e instanceof TenantUnavailableError && e.code === Code.Unavailable);
    assert.equal(w.waiting(T), 3);
    f.release();
    await Promise.all(waiting);
    assert.deepEqual(f.log, ["ensure"]);
    assert.equal(w.waiting(T), 0);
    // The flight is over: the next request starts a new one.
    await w.wake(T, T);
    assert.deepEqual(f.log, ["ensure", "ensure"]);
  });

  test("unreachable after the wait, or a controller failure, is unavailable", async () => {
    const f = fakes();
    f.release();
    f.setReachable(false);
    await assert.rejects(
      new TenantWaker(f).target(T, T),
      (e) => e instanceof PlatformError && e.code === Code.Unavailable,
    );
    const broken = new TenantWaker({
      ...f,
      controller: {
        ensureReady: async () => {
          throw PlatformError.deadlineExceeded("orchestrator down");
        },
        endpoint: async () => undefined,
      },
    });
    await assert.rejects(broken.target(T, T), (e) => e instanceof PlatformError && e.code === Code.Unavailable);
  });

  test("a good worker is trusted for a while, then looked up again", async () => {
    let now = 0;
    const f = fakes("running");
    f.release();
    const w = new TenantWaker({ ...f, knownForMs: 1000, now: () => now });
    const t = await w.target(T, T);
    w.good(T, t);
    await w.target(T, T);
    assert.equal(f.log.length, 1);
    now = 1001;
    await w.target(T, T);
    assert.equal(f.log.length, 2);
  });
});

describe("TenantWaker cold-start budget", () => {
  test("time spent in EnsureReady counts against the 10 s wait", async () => {
    let now = 0;
    const timeouts: number[] = [];
    const w = new TenantWaker({
      now: () => now,
      controller: {
        ensureReady: async () => {
          now += 4000; // a scale-up that itself waited for the worker
          return { deployName: "runtime-t-0a1b2c3d", scaleState: "scaled-up" };
        },
        endpoint: async () => "http://127.0.0.1:1",
      },
      waitReachable: async (_url, ms) => {
        timeouts.push(ms);
        return true;
      },
    });
    await w.target(T, T);
    assert.deepEqual(timeouts, [6000]);
  });
});
