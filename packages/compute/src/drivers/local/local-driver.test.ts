// test-timeout: 300000
// The driver contract on the local driver (64 s at load ~8 with the pause cases; 18 s of them is the max-runtime-while-paused case).
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { driverContract } from "../../testing/driver-contract.ts";
import { LocalDriver } from "./local-driver.ts";

driverContract("local", async (options) => {
  // mkdtemp's 0700 stays: sandboxes must work under a data directory their
  // uid cannot traverse (a clone under /root, say).
  const dataDir = fs.mkdtempSync(join(tmpdir(), "compute-contract-"));
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: options.killGraceMs,
    cgroupPrefix: `platform-compute-test-${process.pid}`,
    dieWithService: true,
  });
  return {
    driver,
    enforcesWorkspaceSize: true,
    cleanup: async () => {
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
});
