// test-timeout: 1200000
// An image built from Debian packages (issue 22): mmdebstrap from Debian's
// mirror, then a sandbox on it runs the packages' programs. Minutes (the
// packages are downloaded); skipped, saying why, where mmdebstrap or root is
// missing or Debian's mirror cannot be reached.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { collectExec, contractSpec } from "../../../testing/driver-contract.ts";
import { LocalDriver } from "../local-driver.ts";
import { debianBuildAvailable } from "./debian-build.ts";

const work = fs.mkdtempSync(join(tmpdir(), "debian-build-"));
let driver: LocalDriver | undefined;
after(async () => {
  await driver?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

async function mirrorReachable(): Promise<string | undefined> {
  try {
    const r = await fetch("http://deb.debian.org/debian/dists/bookworm/Release", {
      signal: AbortSignal.timeout(15_000),
    });
    return r.ok ? undefined : `deb.debian.org answered ${r.status}`;
  } catch (err) {
    return `deb.debian.org cannot be reached: ${(err as Error).message}`;
  }
}

test("platform images build: python3 and git from Debian packages, then a sandbox on it runs them", async (t) => {
  const skip = debianBuildAvailable() ?? (await mirrorReachable());
  if (skip) {
    t.skip(`no build here: ${skip}`);
    return;
  }
  driver = new LocalDriver({
    dataDir: join(work, "data"),
    cgroupPrefix: `platform-compute-test-${process.pid}`,
    dieWithService: true,
    refuseUnknownImages: true,
    warmSandboxes: 0,
  });
  const t0 = performance.now();
  let lines = 0;
  const image = await driver.images.build({
    name: "py:test",
    packages: ["python3", "git"],
    onProgress: () => lines++,
  });
  console.log(
    `built ${image.name} ${image.digest} (${(image.sizeBytes / 2 ** 20).toFixed(0)} MiB) in ${((performance.now() - t0) / 1000).toFixed(0)} s, ${lines} progress lines`,
  );
  assert.match(image.source, /^debian bookworm python3,git$/);
  const spec = contractSpec("py:test");
  await driver.create(spec);
  assert.equal((await driver.waitSettled(spec.sandboxId)).phase, "ready");
  const r = await collectExec(driver, spec.sandboxId, {
    command: "/bin/sh",
    args: [
      "-c",
      "python3 -c 'import sys; print(sys.version_info[0])' && git --version && . /etc/os-release && echo $ID",
    ],
  });
  assert.equal(r.completed.exitCode, 0, r.stderr);
  assert.match(r.stdout, /^3\ngit version [\d.]+\ndebian\n$/);
  // No setuid file is left in the tree (su, mount, passwd are setuid in Debian).
  const setuid = await collectExec(driver, spec.sandboxId, {
    command: "/bin/sh",
    args: ["-c", "find / -xdev -perm /6000 -type f 2>/dev/null | head -3"],
  });
  assert.equal(setuid.stdout, "");
  await driver.destroy(spec.sandboxId);
});
