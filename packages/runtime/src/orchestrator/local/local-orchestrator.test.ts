import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { isServing } from "../../health/grpc-health.ts";
import { orchestratorContract } from "../../testing/orchestrator-contract.ts";
import type { DeploymentSpec } from "../orchestrator.ts";
import { LocalOrchestrator } from "./local-orchestrator.ts";

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "runtime-local-"));
  dirs.push(d);
  return d;
}
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const TENANT = "7e57a000-0000-4000-8000-000000000001";
// The workers never call agents in these tests; any URL will do.
const workerEnv = { AGENTS_GRPC_URL: "http://127.0.0.1:9", LOG_LEVEL: "warn" };

function spec(name: string, replicas: number): DeploymentSpec {
  return {
    name,
    replicas,
    labels: { "runtime.platform.io/tenant": "true" },
    annotations: { "runtime.platform.io/tenant-id": TENANT },
    serviceAnnotations: { "runtime.platform.io/tenant-id": TENANT },
    env: { TENANT_ID: TENANT, ORG_ID: TENANT },
  };
}

function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

orchestratorContract("local", async () =>
  LocalOrchestrator.open({ dataDir: await tempDir(), workerEnv, workerStdio: "ignore", scaleWaitMs: 90_000 }),
);

describe("local orchestrator processes", () => {
  test("replicas 0 is no process; scale-up starts a worker that answers health; a dead worker is restarted; scale-down stops it", async () => {
    const orch = await LocalOrchestrator.open({ dataDir: await tempDir(), workerEnv, workerStdio: "ignore", scaleWaitMs: 90_000 });
    try {
      await orch.createDeployment(spec("runtime-t-aaaa0001", 0));
      assert.equal(orch.pidOf("runtime-t-aaaa0001"), undefined);
      const url = (await orch.endpoint("runtime-t-aaaa0001"))!;
      assert.equal(await isServing(url), false);

      await orch.scaleDeployment("runtime-t-aaaa0001", 1);
      // scale-up returns once the worker is SERVING
      assert.equal(await isServing(url), true);
      assert.equal((await orch.getDeployment("runtime-t-aaaa0001"))?.readyReplicas, 1);
      const first = orch.pidOf("runtime-t-aaaa0001");
      assert.ok(alive(first));

      // A worker that dies is restarted, as a Deployment's pod would be.
      process.kill(first!, "SIGKILL");
      assert.ok(
        await until(async () => {
          const now = orch.pidOf("runtime-t-aaaa0001");
          return now !== undefined && now !== first && (await isServing(url));
        }, 90_000),
        "restarted",
      );
      const pid = orch.pidOf("runtime-t-aaaa0001");

      await orch.scaleDeployment("runtime-t-aaaa0001", 0);
      assert.equal(alive(pid), false);
      assert.equal(orch.pidOf("runtime-t-aaaa0001"), undefined);
      assert.equal((await orch.getDeployment("runtime-t-aaaa0001"))?.readyReplicas, 0);
      assert.equal(await isServing(url), false);
    } finally {
      await orch.close();
    }
  });

  test("state survives a restart: annotations, replicas, endpoint; running workers come back", async () => {
    const dataDir = await tempDir();
    const first = await LocalOrchestrator.open({ dataDir, workerEnv, workerStdio: "ignore", scaleWaitMs: 90_000 });
    await first.createDeployment(spec("runtime-t-aaaa0002", 1));
    await first.createDeployment(spec("runtime-t-aaaa0003", 0));
    await first.patchAnnotations("runtime-t-aaaa0002", { "runtime.platform.io/last-seen-at": "2026-11-21T10:00:00.000Z" });
    const url = await first.endpoint("runtime-t-aaaa0002");
    const pid = first.pidOf("runtime-t-aaaa0002");
    await first.close();
    assert.equal(alive(pid), false, "close stops the workers");

    const second = await LocalOrchestrator.open({ dataDir, workerEnv, workerStdio: "ignore", scaleWaitMs: 90_000 });
    try {
      const d = await second.getDeployment("runtime-t-aaaa0002");
      assert.equal(d?.replicas, 1);
      assert.equal(d?.annotations["runtime.platform.io/last-seen-at"], "2026-11-21T10:00:00.000Z");
      assert.equal(d?.annotations["runtime.platform.io/tenant-id"], TENANT);
      assert.equal((await second.getDeployment("runtime-t-aaaa0003"))?.replicas, 0);
      assert.equal(await second.endpoint("runtime-t-aaaa0002"), url);
      assert.ok(await until(() => isServing(url!), 90_000), "the running deployment's worker is restarted");
      assert.equal(second.pidOf("runtime-t-aaaa0003"), undefined);
    } finally {
      await second.close();
    }
  });

  test("no orphans: workers exit when their router is killed with SIGKILL", async () => {
    const dataDir = await tempDir();
    const script = `
      import { LocalOrchestrator } from ${JSON.stringify(new URL("./local-orchestrator.ts", import.meta.url).pathname)};
      const orch = await LocalOrchestrator.open({ dataDir: ${JSON.stringify(dataDir)}, workerEnv: ${JSON.stringify(workerEnv)}, workerStdio: "ignore", scaleWaitMs: 90_000 });
      await orch.createDeployment(${JSON.stringify(spec("runtime-t-aaaa0005", 1))});
      console.log(orch.pidOf("runtime-t-aaaa0005"));
      setInterval(() => {}, 1000);
    `;
    const router = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const workerPid = await new Promise<number>((resolve, reject) => {
      let out = "";
      router.stdout.on("data", (c) => {
        out += c;
        const m = /(\d+)\n/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      router.once("exit", () => reject(new Error(`router exited early: ${out}`)));
    });
    assert.ok(alive(workerPid));
    router.kill("SIGKILL");
    assert.ok(await until(() => !alive(workerPid), 30_000), "worker exits once its router is gone");
  });
});
