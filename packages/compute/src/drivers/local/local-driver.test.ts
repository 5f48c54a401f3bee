import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { driverContract } from "../../testing/driver-contract.ts";
import { LocalDriver } from "./local-driver.ts";

driverContract("local", async (options) => {
  const dataDir = fs.mkdtempSync(join(tmpdir(), "compute-contract-"));
  fs.chmodSync(dataDir, 0o711);
  const driver = new LocalDriver({ dataDir, killGraceMs: options.killGraceMs, cgroupPrefix: `platform-compute-test-${process.pid}`, dieWithService: true });
  return {
    driver,
    cleanup: async () => {
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
});
