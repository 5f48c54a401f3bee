// test-timeout: 300000
// Sandboxes of the local driver on stored images (issue 22): each sees its
// image's root (two images, two /etc/os-release), read-only, with the
// workspace the one writable place; the host mode stays the default while the
// default image is not stored; an unknown image is INVALID_ARGUMENT listing
// the images; an image in use cannot be removed; warm sandboxes per image.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Code, type PlatformError } from "@platform/errors";
import { collectExec, contractSpec } from "../../../testing/driver-contract.ts";
import { dockerSaveArchive, stageRootfs, tarLayer } from "../../../testing/image-fixtures.ts";
import { LocalDriver } from "../local-driver.ts";

let work: string;
let driver: LocalDriver;

async function ready(image: string) {
  const spec = contractSpec(image);
  await driver.create(spec);
  const o = await driver.waitSettled(spec.sandboxId);
  assert.equal(o.phase, "ready", JSON.stringify(o));
  return spec.sandboxId;
}
const sh = async (id: string, script: string) => collectExec(driver, id, { command: "/bin/sh", args: ["-c", script] });

before(async () => {
  work = fs.mkdtempSync(join(tmpdir(), "sandbox-images-"));
  const base = join(work, "base");
  stageRootfs(base, { "etc/os-release": "ID=base\n" });
  await tarLayer(base, join(work, "base.tar"));
  for (const id of ["alpha", "bravo"]) {
    const top = join(work, id);
    fs.mkdirSync(join(top, "etc"), { recursive: true });
    fs.writeFileSync(join(top, "etc", "os-release"), `ID=${id}\n`);
    fs.writeFileSync(join(top, `marker-${id}`), id);
    await tarLayer(top, join(work, `${id}.tar`), true);
    await dockerSaveArchive([join(work, "base.tar"), join(work, `${id}.tar`)], join(work, `${id}-saved.tar`), work);
  }
  driver = new LocalDriver({
    dataDir: join(work, "data"),
    killGraceMs: 500,
    cgroupPrefix: `platform-compute-test-${process.pid}`,
    dieWithService: true,
    defaultImage: "debian:bookworm-slim",
    refuseUnknownImages: true,
    warmSandboxes: 1,
  });
  await driver.images.import(join(work, "alpha-saved.tar"), "alpha:1");
  await driver.images.import(join(work, "bravo-saved.tar"), "bravo:1");
});
after(async () => {
  await driver?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

describe("sandboxes on images", () => {
  test("two images, two roots: each sandbox sees its own /etc/os-release and files, none of the host's /usr", async () => {
    const a = await ready("alpha:1");
    const b = await ready("bravo:1");
    const ra = await sh(
      a,
      "cat /etc/os-release; ls / | tr '\\n' ' '; ls /usr/lib 2>&1 >/dev/null | head -c 0; test -e /usr/lib && echo host-usr",
    );
    const rb = await sh(b, "cat /etc/os-release; ls / | tr '\\n' ' '");
    console.log(`alpha sees: ${JSON.stringify(ra.stdout)}\nbravo sees: ${JSON.stringify(rb.stdout)}`);
    assert.match(ra.stdout, /^ID=alpha\n/);
    assert.match(rb.stdout, /^ID=bravo\n/);
    assert.match(ra.stdout, /marker-alpha/);
    assert.doesNotMatch(ra.stdout, /marker-bravo|host-usr/);
    assert.match(rb.stdout, /marker-bravo/);
    // The image is read-only; the workspace and /tmp are the writable places; the generated passwd is bound over the image's.
    const w = await sh(
      a,
      "touch /marker-alpha 2>/dev/null && echo root-writable; touch /etc/x 2>/dev/null && echo etc-writable; echo ok > f && cat f; touch /tmp/t && echo tmp-ok; cat /etc/passwd | head -c 8; echo; id -u",
    );
    assert.equal(w.completed.exitCode, 0, w.stderr);
    assert.doesNotMatch(w.stdout, /writable/);
    assert.match(w.stdout, /ok\ntmp-ok\nsandbox:\n\d+/);
    await driver.destroy(a);
    await driver.destroy(b);
  });

  test("no image and the default image not stored: the host's /usr, as before images; `host` asks for it", async () => {
    const hostRelease = fs.readFileSync("/etc/os-release", "utf8");
    for (const image of ["", "debian:bookworm-slim", "host"]) {
      const id = await ready(image);
      const r = await sh(id, "cat /etc/os-release; test -e /usr/lib && echo host-usr");
      assert.equal(r.stdout, `${hostRelease}host-usr\n`, image);
      await driver.destroy(id);
    }
  });

  test("an unknown image is INVALID_ARGUMENT naming the images there are", async () => {
    await assert.rejects(driver.create(contractSpec("nope:1")), (e: PlatformError) => {
      assert.equal(e.code, Code.InvalidArgument);
      assert.equal(e.reason, "image_not_found");
      assert.match(e.message, /unknown image "nope:1"; available: alpha:1, bravo:1, host/);
      return true;
    });
  });

  test("an image in use is not removed (FAILED_PRECONDITION); once its sandbox is gone it is", async () => {
    const id = await ready("bravo:1");
    const digest = driver.images.store.find("bravo:1")?.digest as string;
    await assert.rejects(driver.images.remove("bravo:1"), (e: PlatformError) => e.reason === "image_in_use");
    // A paused sandbox still holds it.
    await driver.pause(id);
    await assert.rejects(driver.images.remove("bravo:1"), (e: PlatformError) => e.reason === "image_in_use");
    await driver.destroy(id);
    await driver.images.remove("bravo:1");
    assert.deepEqual(
      driver.images.list().images.map((i) => i.name),
      ["alpha:1"],
    );
    assert.equal(fs.existsSync(driver.images.store.treeOf(digest)), false, "its tree is removed with its last name");
  });

  test("a name imported again while a sandbox runs on it: the old tree stays until GC finds it unused", async () => {
    const id = await ready("alpha:1");
    const old = driver.images.store.find("alpha:1")?.digest as string;
    const again = await driver.images.import(join(work, "bravo-saved.tar"), "alpha:1");
    assert.notEqual(again.digest, old);
    await driver.collectGarbage();
    assert.ok(fs.existsSync(driver.images.store.treeOf(old)), "kept while the sandbox runs on it");
    assert.match((await sh(id, "cat /etc/os-release")).stdout, /^ID=alpha\n/);
    await driver.destroy(id);
    await driver.collectGarbage();
    assert.equal(fs.existsSync(driver.images.store.treeOf(old)), false, "removed once unused");
    await driver.images.import(join(work, "alpha-saved.tar"), "alpha:1");
  });

  test("an image without a shell or sleep starts: the sandbox's init is compute's own, run from a descriptor", async () => {
    // One static program and nothing else (no /bin/sh, no sleep, no C library).
    const top = join(work, "shell-less");
    fs.mkdirSync(join(top, "etc"), { recursive: true });
    fs.writeFileSync(join(top, "etc", "os-release"), "ID=shell-less\n");
    fs.writeFileSync(join(work, "hello.c"), '#include <stdio.h>\nint main(void) { puts("static hello"); return 0; }\n');
    execFileSync(process.env.CC ?? "cc", ["-static", "-O2", "-o", join(top, "hello"), join(work, "hello.c")]);
    await tarLayer(top, join(work, "shell-less.tar"));
    await dockerSaveArchive([join(work, "shell-less.tar")], join(work, "shell-less-saved.tar"), work);
    await driver.images.import(join(work, "shell-less-saved.tar"), "shell-less:1");
    const id = await ready("shell-less:1");
    const r = await collectExec(driver, id, { command: "/hello" });
    assert.equal(r.stdout, "static hello\n");
    await driver.destroy(id);
  });

  test("an image once used keeps a warm sandbox: the next create on it adopts one (create → first byte printed)", async () => {
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const id = await ready("alpha:1");
      await sh(id, "echo hi");
      times.push(performance.now() - t0);
      await driver.destroy(id);
      // Give the pool time to make its next one.
      for (let w = 0; w < 100 && !driver.warmReady("alpha:1"); w++) await new Promise((r) => setTimeout(r, 100));
    }
    console.log(
      `alpha:1 create → first byte: ${times.map((t) => t.toFixed(1)).join(", ")} ms (the first has no warm sandbox)`,
    );
    assert.ok(driver.warmReady("alpha:1"));
  });
});
