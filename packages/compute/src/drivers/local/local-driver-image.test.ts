// test-timeout: 300000
// The driver contract on the local driver with every sandbox on a stored
// image (issue 22): a tree imported here from the host's own programs, so
// nothing of the host's /usr is in the sandboxes.
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { driverContract } from "../../testing/driver-contract.ts";
import { stageRootfs, tarLayer } from "../../testing/image-fixtures.ts";
import { LocalDriver } from "./local-driver.ts";

driverContract("local on an image", async (options) => {
  const dataDir = fs.mkdtempSync(join(tmpdir(), "compute-contract-image-"));
  const rootfs = join(dataDir, "stage");
  stageRootfs(rootfs, { "etc/os-release": "ID=contract\n" });
  await tarLayer(rootfs, join(dataDir, "rootfs.tar"));
  const driver = new LocalDriver({
    dataDir,
    killGraceMs: options.killGraceMs,
    cgroupPrefix: `platform-compute-test-${process.pid}`,
    dieWithService: true,
    defaultImage: "contract:1",
    warmSandboxes: 2,
  });
  await driver.images.import(join(dataDir, "rootfs.tar"), "contract:1");
  return {
    driver,
    image: "contract:1",
    enforcesWorkspaceSize: true,
    cleanup: async () => {
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
});
