// The compute service as a process, with COMPUTE_KEEP_SANDBOXES_ON_EXIT=false
// (the one-command launcher): once it is stopped no workspace stays mounted
// and no loop device stays attached.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import { isMountPoint, loopDevicesBackedBy, mountPointsOf } from "./drivers/local/mount-table.ts";
import { WorkspaceImage } from "./drivers/local/workspace-image.ts";

test("a compute service stopped with COMPUTE_KEEP_SANDBOXES_ON_EXIT=false leaves no mounted workspace and no loop device", async () => {
  const dataDir = fs.mkdtempSync(join(tmpdir(), "compute-keep-off-"));
  fs.chmodSync(dataDir, 0o711);
  const main = fileURLToPath(new URL("./main.ts", import.meta.url));
  const child = spawn(process.execPath, ["--liftoff-only", "--import", "tsx", main], {
    env: {
      ...process.env,
      COMPUTE_PORT: "0",
      HOST: "127.0.0.1",
      COMPUTE_DATA_DIR: dataDir,
      DATABASE_URL: "",
      COMPUTE_KEEP_SANDBOXES_ON_EXIT: "false",
      PVC_WORKSPACE_SIZE: "64Mi",
      INTERNAL_TLS: "off",
      LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("compute did not start in 60 s")), 60_000);
      child.once("exit", (code) => reject(new Error(`compute exited with ${code}`)));
      createInterface({ input: child.stdout }).on("line", (line) => {
        const entry = JSON.parse(line) as { msg?: string; port?: number };
        if (entry.msg === "compute listening" && entry.port) {
          clearTimeout(timer);
          resolve(entry.port);
        }
      });
    });
    const client = createClient(ComputeService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${port}` }));
    for (const size of ["", "48Mi"]) {
      const { sandboxId } = await client.createSandbox({
        tenantId: randomUUID(),
        sessionId: randomUUID(),
        workspace: { size },
      });
      for await (const e of client.execCommand({ sandboxId, command: "/bin/sh", args: ["-c", "echo data > file"] })) {
        if (e.event.case === "completed") assert.equal(e.event.value.exitCode, 0);
      }
    }
    const devices = loopDevicesBackedBy(dataDir);
    assert.ok(devices.length >= 2, `loop devices while running: ${devices.join(" ")}`);
    assert.ok(devices.every((d) => mountPointsOf(d).length === 1));
    const workspaces = join(dataDir, "workspaces");
    const mounted = fs
      .readdirSync(workspaces)
      .map((key) => new WorkspaceImage(join(workspaces, key, "workspace.img")).mountPoint());
    assert.ok(mounted.length >= 2 && mounted.every(isMountPoint));
    child.kill("SIGTERM");
    assert.equal(await exited, 0);
    // The sandboxes end with the service; their devices detach as the last of their processes goes.
    for (let i = 0; i < 200 && loopDevicesBackedBy(dataDir).length > 0; i++) await sleep(50);
    assert.deepEqual(loopDevicesBackedBy(dataDir), []);
    for (const point of mounted) assert.equal(isMountPoint(point), false, `${point} is unmounted`);
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});
