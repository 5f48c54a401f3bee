// The local driver turns the kernel's favordynmods on (dynmods.ts): without
// it the first cgroup migration after a quiet spell waits an RCU grace period
// (12-20 ms measured), which a released sandbox's resume pays. Root only.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { DYNMODS_MOUNT, favorDynamicCgroupMods, favorDynmodsMounted } from "./dynmods.ts";
import { LocalDriver } from "./local-driver.ts";

const mounted = () => fs.readFileSync("/proc/self/mounts", "utf8").includes(` ${DYNMODS_MOUNT} `);
const unmount = () => {
  // Lazily: a driver of another test file may be starting beside this one (it only gets slower meanwhile).
  if (mounted()) execFileSync("umount", ["-l", DYNMODS_MOUNT]);
};
const driverAt = (dir: string, favorDynamicCgroupMods?: boolean) =>
  new LocalDriver({
    dataDir: dir,
    cgroupPrefix: `platform-compute-dynmods-${process.pid}`,
    warmSandboxes: 0,
    favorDynamicCgroupMods,
  });

test("a local driver told to mounts a cgroup hierarchy with favordynmods, once per machine; by default it does not", async (t) => {
  unmount();
  if (favorDynmodsMounted()) {
    t.skip("the machine has a favordynmods hierarchy of its own: the driver need not mount one");
    return;
  }
  const dir = fs.mkdtempSync(join(tmpdir(), "compute-dynmods-"));
  try {
    const off = driverAt(dir);
    await off.close();
    assert.ok(!mounted(), "mounted by default");

    const on = driverAt(dir, true);
    await on.close();
    assert.match(
      fs.readFileSync("/proc/self/mounts", "utf8"),
      new RegExp(`${DYNMODS_MOUNT} cgroup \\S*favordynmods\\S*name=platform-dynmods`),
    );
    // It stays after the driver (other drivers of the machine rely on it); the next one finds it.
    assert.ok(favorDynmodsMounted());
    assert.equal(favorDynamicCgroupMods(), "already");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    // Unmounted, as the other test files expect by default. On Linux 6.18 and later the kernel's migration
    // lock stays per-threadgroup until a reboot all the same (a one-way switch): cgroup moves stay cheap
    // for every later test on this machine, and a benchmark's numbers with them (bench cgroup-migration.ts).
    unmount();
  }
});
