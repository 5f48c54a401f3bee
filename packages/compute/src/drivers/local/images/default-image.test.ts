// test-timeout: 300000
// The default image on first use (issue 22): with COMPUTE_DEFAULT_IMAGE_PACKAGES
// set and SANDBOX_IMAGE not stored, compute builds it in the background,
// saying so; sandboxes made meanwhile run on the host's /usr, those made after
// on the image; a build that fails or is stopped stores nothing and leaves the
// host mode. The build itself is the store's (an archive made here stands in
// for mmdebstrap's download); the real mmdebstrap is started and stopped once,
// where it can run, to show a stop leaves no process and no mount behind.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Code, type PlatformError } from "@platform/errors";
import { pino } from "pino";
import { collectExec, contractSpec } from "../../../testing/driver-contract.ts";
import { dockerSaveArchive, stageRootfs, tarLayer } from "../../../testing/image-fixtures.ts";
import { LocalDriver } from "../local-driver.ts";
import { mountPointsUnder } from "../mount-table.ts";
import { debianBuildAvailable } from "./debian-build.ts";
import { buildDefaultImage } from "./default-image.ts";

const DEFAULT = "debian:bookworm-slim";
let work: string;
let archive: string;
const drivers: LocalDriver[] = [];

/** A logger whose lines the test reads. */
function recorder() {
  const lines: string[] = [];
  const logger = pino(
    { level: "info" },
    { write: (s: string) => void lines.push((JSON.parse(s) as { msg: string }).msg) },
  );
  return { logger, lines };
}

function newDriver(name: string, log?: ReturnType<typeof recorder>["logger"]): LocalDriver {
  const driver = new LocalDriver({
    dataDir: join(work, name),
    killGraceMs: 500,
    cgroupPrefix: `platform-compute-test-${process.pid}-${name}`,
    dieWithService: true,
    defaultImage: DEFAULT,
    refuseUnknownImages: true,
    warmSandboxes: 1,
    ...(log ? { logger: log } : {}),
  });
  drivers.push(driver);
  return driver;
}

async function osRelease(driver: LocalDriver): Promise<string> {
  const spec = contractSpec("");
  await driver.create(spec);
  assert.equal((await driver.waitSettled(spec.sandboxId)).phase, "ready");
  const r = await collectExec(driver, spec.sandboxId, {
    command: "/bin/sh",
    args: ["-c", "cat /etc/os-release 2>/dev/null | head -1; test -e /marker-default && echo image-root"],
  });
  await driver.destroy(spec.sandboxId);
  return r.stdout;
}

before(async () => {
  work = fs.mkdtempSync(join(tmpdir(), "default-image-"));
  const root = join(work, "rootfs");
  stageRootfs(root, { "etc/os-release": "ID=built-default\n", "marker-default": "x" });
  archive = join(work, "default.tar");
  const layer = join(work, "layer.tar");
  await tarLayer(root, layer);
  await dockerSaveArchive([layer], archive, work);
});
after(async () => {
  for (const d of drivers) await d.close();
  fs.rmSync(work, { recursive: true, force: true });
});

test("built in the background when not stored: host /usr meanwhile, the image after, progress logged", async () => {
  const { logger, lines } = recorder();
  const driver = newDriver("built", logger);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const asked: string[][] = [];
  const build = buildDefaultImage(driver.images, ["python3", "nodejs", "git"], logger, {
    unavailable: () => undefined,
    build: async (b) => {
      asked.push(b.packages);
      assert.equal(b.background, true);
      b.onProgress?.("I: downloading packages with apt...");
      b.onProgress?.("Get:1 http://deb.debian.org/debian bookworm/main amd64 libc6");
      await gate;
      return driver.images.import(archive, b.name);
    },
  });
  assert.ok(build, "a build starts while the default image is not stored");
  assert.deepEqual(asked, [["python3", "nodejs", "git"]]);
  assert.ok(
    lines.some((l) => l.startsWith(`building the default sandbox image ${DEFAULT}`)),
    lines.join("\n"),
  );
  assert.ok(lines.includes("default sandbox image: downloading packages with apt..."));
  // apt's own lines are not progress steps.
  assert.ok(!lines.some((l) => l.includes("Get:1")));

  // Meanwhile: the host's /usr, as without images.
  assert.doesNotMatch(await osRelease(driver), /built-default|image-root/);
  release();
  const image = await build.done;
  assert.equal(image?.name, DEFAULT);
  assert.ok(
    lines.some((l) => l.startsWith(`the default sandbox image ${DEFAULT} is stored`)),
    lines.join("\n"),
  );
  // After: the image's root, warm pool included.
  assert.match(await osRelease(driver), /ID=built-default\nimage-root/);
  assert.match(await osRelease(driver), /ID=built-default\nimage-root/);

  // Stored now: the next start builds nothing.
  assert.equal(buildDefaultImage(driver.images, ["python3"], logger), undefined);
});

test("nothing to build: no packages, the host mode, or no build possible here (logged)", async () => {
  const { logger, lines } = recorder();
  const driver = newDriver("none", logger);
  assert.equal(buildDefaultImage(driver.images, [], logger), undefined);
  assert.equal(
    buildDefaultImage(driver.images, ["git"], logger, { unavailable: () => "mmdebstrap is not installed" }),
    undefined,
  );
  assert.ok(
    lines.some((l) => l.includes("cannot be built here (mmdebstrap is not installed)")),
    lines.join("\n"),
  );
  assert.throws(
    () => buildDefaultImage(driver.images, ["python3", "rm -rf /"], logger),
    (e: PlatformError) => e.code === Code.InvalidArgument,
  );
});

test("a failed or stopped build stores nothing; sandboxes stay on the host's /usr", async () => {
  const { logger, lines } = recorder();
  const driver = newDriver("failed", logger);
  const failed = buildDefaultImage(driver.images, ["git"], logger, {
    unavailable: () => undefined,
    build: async () => {
      throw new Error("mmdebstrap failed (exit 1): E: cannot reach the mirror");
    },
  });
  assert.equal(await failed?.done, undefined);
  assert.ok(
    lines.some((l) => l.startsWith("the default sandbox image could not be built")),
    lines.join("\n"),
  );
  assert.equal(driver.images.store.find(DEFAULT), undefined);
  assert.doesNotMatch(await osRelease(driver), /built-default/);

  const stopped = buildDefaultImage(driver.images, ["git"], logger, {
    unavailable: () => undefined,
    build: (b) =>
      new Promise((_, reject) => b.signal?.addEventListener("abort", () => reject(b.signal?.reason), { once: true })),
  });
  await stopped?.stop();
  assert.ok(
    lines.some((l) => l.includes("build stopped")),
    lines.join("\n"),
  );
  assert.equal(driver.images.store.find(DEFAULT), undefined);
});

test("the real mmdebstrap, stopped a few seconds in: no process, no mount, no scratch tree left", async (t) => {
  const skip = debianBuildAvailable();
  if (skip) return t.skip(`no build here: ${skip}`);
  const { logger, lines } = recorder();
  const driver = newDriver("real", logger);
  const build = buildDefaultImage(driver.images, ["git"], logger);
  assert.ok(build);
  await new Promise((r) => setTimeout(r, 4000));
  await build.stop();
  console.log(`log of the stopped build:\n  ${lines.join("\n  ")}`);
  const images = join(work, "real", "images");
  assert.deepEqual(mountPointsUnder(images), []);
  const ps = execFileSync("ps", ["-eo", "args"], { encoding: "utf8" });
  assert.doesNotMatch(ps, new RegExp(`mmdebstrap.*${images.replaceAll("/", "\\/")}`));
  // A build works in images/tmp/<uuid> (the store's scratch).
  const tmp = join(images, "tmp");
  const left = fs.existsSync(tmp) ? fs.readdirSync(tmp) : [];
  assert.deepEqual(left, [], `left under ${tmp}: ${left.join(", ")}`);
  assert.equal(driver.images.store.find(DEFAULT), undefined);
});
