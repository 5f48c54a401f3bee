// A local driver of a test's own with READY sandboxes, for tests that watch
// what the driver does around an exec (its exec cgroups, its slots).
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { LocalDriver } from "../drivers/local/local-driver.ts";
import { contractSpec } from "./driver-contract.ts";

export interface ReadySandboxes {
  driver: LocalDriver;
  ids: string[];
  /** The exec cgroups of a sandbox, sorted: the slot made ahead and those of execs not cleaned up yet. */
  execCgroups(id: string): string[];
  /** Destroys the sandboxes, closes the driver, removes its data directory. */
  close(): Promise<void>;
}

/** A driver without warm pool under a cgroup prefix named for `name`, with `count` sandboxes READY. */
export async function readySandboxes(name: string, count: number): Promise<ReadySandboxes> {
  const dataDir = fs.mkdtempSync(join(tmpdir(), `compute-${name}-`));
  fs.chmodSync(dataDir, 0o711);
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: 300,
    dieWithService: true,
    warmSandboxes: 0,
    cgroupPrefix: `platform-compute-${name}-${process.pid}`,
  });
  const specs = Array.from({ length: count }, () => contractSpec("local"));
  for (const spec of specs) await driver.create(spec);
  for (const spec of specs) {
    assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(20_000))).phase, "ready");
  }
  const ids = specs.map((s) => s.sandboxId);
  return {
    driver,
    ids,
    execCgroups: (id) =>
      fs
        .readdirSync(dirname(driver.cgroupOf(id).procsFiles()[0] as string))
        .filter((n) => n.startsWith("exec-"))
        .sort(),
    async close() {
      for (const id of ids) await driver.destroy(id).catch(() => {});
      await driver.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
