// test-timeout: 300000
// The image store's import (issue 22): docker save archives, OCI layouts and
// plain root filesystem tarballs made here from the host's own programs,
// layers with whiteouts applied in order, and hostile entries refused by name.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { PlatformError } from "@platform/errors";
import { dockerSaveArchive, ociLayout, rawTar, stageRootfs, tarLayer } from "../../../testing/image-fixtures.ts";
import { mountPointsUnder } from "../mount-table.ts";
import { ImageStore } from "./image-store.ts";

let work: string;
let store: ImageStore;
const layers: Record<string, string> = {};

before(async () => {
  work = fs.mkdtempSync(join(tmpdir(), "image-store-"));
  store = new ImageStore(join(work, "data"));
  // Layer 0: a shell and a few tools, files the next layer hides, a setuid file.
  const base = join(work, "base");
  stageRootfs(
    base,
    {
      "etc/os-release": "ID=base\n",
      "etc/removed": "gone later\n",
      "opq/lower-a": "a\n",
      "opq/lower-b": "b\n",
      "keep/lower": "kept\n",
    },
    ["sh", "cat"],
  );
  fs.writeFileSync(join(base, "bin", "suid"), "x");
  fs.chmodSync(join(base, "bin", "suid"), 0o4755);
  fs.symlinkSync("/bin/sh", join(base, "bin", "abs-sh"));
  layers.base = join(work, "base.tar");
  await tarLayer(base, layers.base);
  // Layer 1: a whiteout of etc/removed, an opaque opq/ with a new file of its own, a changed os-release.
  const top = join(work, "top");
  fs.mkdirSync(join(top, "etc"), { recursive: true });
  fs.mkdirSync(join(top, "opq"), { recursive: true });
  fs.writeFileSync(join(top, "etc", ".wh.removed"), "");
  fs.writeFileSync(join(top, "opq", ".wh..wh..opq"), "");
  fs.writeFileSync(join(top, "opq", "upper"), "upper\n");
  fs.writeFileSync(join(top, "etc", "os-release"), "ID=top\n");
  layers.top = join(work, "top.tar.gz");
  await tarLayer(top, layers.top, true);
});
after(() => fs.rmSync(work, { recursive: true, force: true }));

describe("import", () => {
  let digest = "";
  test("a docker save archive: layers in order, whiteouts and opaque directories applied, setuid dropped", async () => {
    const archive = join(work, "saved.tar");
    await dockerSaveArchive([layers.base as string, layers.top as string], archive, work);
    const image = await store.import(archive, "tiny:1");
    assert.equal(image.name, "tiny:1");
    assert.match(image.digest, /^sha256:[0-9a-f]{64}$/);
    digest = image.digest;
    const tree = store.treeOf(image.digest);
    assert.equal(fs.readFileSync(join(tree, "etc/os-release"), "utf8"), "ID=top\n");
    assert.equal(fs.existsSync(join(tree, "etc/removed")), false, "the whiteout removed the lower file");
    assert.deepEqual(
      fs.readdirSync(join(tree, "opq")),
      ["upper"],
      "opaque: the lower entries are gone, the layer's own stay",
    );
    assert.equal(fs.readFileSync(join(tree, "keep/lower"), "utf8"), "kept\n");
    assert.equal(fs.existsSync(join(tree, "etc/.wh.removed")), false, "whiteout files are not kept");
    assert.equal(fs.statSync(join(tree, "bin/suid")).mode & 0o7777, 0o755, "setuid dropped");
    assert.equal(fs.statSync(join(tree, "bin/sh")).uid, 0);
    assert.equal(
      fs.readlinkSync(join(tree, "bin/abs-sh")),
      "/bin/sh",
      "an absolute link keeps its target (the image's root)",
    );
    for (const f of ["passwd", "group", "hosts", "hostname"]) assert.ok(fs.lstatSync(join(tree, "etc", f)).isFile());
    assert.deepEqual(
      store.list().map((i) => i.name),
      ["tiny:1"],
    );
  });

  test("the same layers as an OCI layout directory: the same digest, one shared tree", async () => {
    const dir = join(work, "oci");
    ociLayout(
      [
        { file: layers.base as string, gzip: false },
        { file: layers.top as string, gzip: true },
      ],
      dir,
    );
    const image = await store.import(dir, "tiny-oci:2");
    assert.equal(image.digest, digest);
    assert.equal(fs.readdirSync(join(store.dir, "trees")).length, 1);
  });

  test("an OCI layout whose blob does not match its digest is refused", async () => {
    const dir = join(work, "oci-bad");
    ociLayout([{ file: layers.base as string, gzip: false }], dir);
    const index = JSON.parse(fs.readFileSync(join(dir, "index.json"), "utf8"));
    const manifest = JSON.parse(fs.readFileSync(join(dir, "blobs/sha256", index.manifests[0].digest.slice(7)), "utf8"));
    fs.appendFileSync(join(dir, "blobs/sha256", manifest.layers[0].digest.slice(7)), "tampered");
    await assert.rejects(store.import(dir, "bad:1"), /does not match its digest/);
  });

  test("a plain root filesystem tarball is one layer", async () => {
    const image = await store.import(layers.base as string, "base");
    assert.equal(image.name, "base:latest");
    assert.equal(fs.readFileSync(join(store.treeOf(image.digest), "etc/removed"), "utf8"), "gone later\n");
  });

  test("remove: refused while in use, then the name and (unshared) tree go", async () => {
    const base = store.find("base:latest");
    assert.ok(base);
    await assert.rejects(
      store.remove("base:latest", new Set([base.digest])),
      (e: PlatformError) => e.reason === "image_in_use",
    );
    await store.remove("base:latest", new Set());
    assert.equal(store.find("base:latest"), undefined);
    assert.equal(fs.existsSync(store.treeOf(base.digest)), false);
    await assert.rejects(store.remove("base:latest", new Set()), (e: PlatformError) => e.reason === "image_not_found");
  });

  test("malformed names are refused", async () => {
    for (const name of ["UPPER:1", "a:b:c:", "../x:1", "host", "a:" + "t".repeat(200)])
      await assert.rejects(
        store.import(layers.base as string, name),
        (e: PlatformError) => e.reason === "invalid_argument",
        name,
      );
  });
});

describe("hostile entries are refused, naming the entry, and nothing is stored", () => {
  // Links in these layers point at a directory of the test's own, never at the host's files: should the
  // checks break, what the layer would overwrite or remove is this victim, which the test then finds changed.
  const victim = join(tmpdir(), `image-store-victim-${process.pid}`);
  before(() => {
    fs.mkdirSync(victim, { recursive: true });
    fs.writeFileSync(join(victim, "passwd"), "victim\n");
  });
  after(() => fs.rmSync(victim, { recursive: true, force: true }));
  const cases: Array<{
    what: string;
    entries: Parameters<typeof rawTar>[1];
    lower?: Parameters<typeof rawTar>[1];
    message: RegExp;
  }> = [
    {
      what: "absolute name",
      entries: [{ name: "/etc/evil", type: "file", data: "x" }],
      message: /"\/etc\/evil" refused: absolute name/,
    },
    {
      what: "..",
      entries: [{ name: "a/../../evil", type: "file", data: "x" }],
      message: /"a\/..\/..\/evil" refused: '..'/,
    },
    {
      what: "symlink out",
      entries: [{ name: "a/link", type: "symlink", target: "../../../etc/shadow" }],
      message: /"a\/link" refused: symbolic link .* points out of the root/,
    },
    {
      what: "hard link out",
      entries: [{ name: "hl", type: "hardlink", target: "../etc/shadow" }],
      message: /"hl" refused: hard link .* points out of the root/,
    },
    {
      what: "absolute hard link",
      entries: [{ name: "hl", type: "hardlink", target: "/etc/shadow" }],
      message: /"hl" refused: hard link to an absolute name/,
    },
    {
      what: "device node",
      entries: [{ name: "dev/mem", type: "chardev" }],
      message: /"dev\/mem" refused: device node/,
    },
    { what: "fifo", entries: [{ name: "pipe", type: "fifo" }], message: /"pipe" refused: FIFO/ },
    {
      what: "write through a symlink of the same layer",
      entries: [
        { name: "esc", type: "symlink", target: victim },
        { name: "esc/evil", type: "file", data: "x" },
      ],
      message: /"esc\/evil" refused: written through the non-directory esc/,
    },
    {
      what: "write through a symlink of a lower layer",
      lower: [{ name: "esc", type: "symlink", target: victim }],
      entries: [{ name: "esc/evil", type: "file", data: "x" }],
      message: /"esc\/evil" refused: written through the non-directory esc/,
    },
    {
      what: "whiteout through a symlink of a lower layer",
      lower: [{ name: "esc", type: "symlink", target: victim }],
      entries: [{ name: "esc/.wh.passwd", type: "file" }],
      message: /"esc\/.wh.passwd" refused: whiteout through the non-directory esc/,
    },
  ];
  for (const c of cases)
    test(c.what, async () => {
      const upper = join(work, `hostile-${c.what.replace(/\W/g, "_")}.tar`);
      rawTar(upper, c.entries);
      let source = upper;
      if (c.lower) {
        const lower = join(work, `hostile-lower-${c.what.replace(/\W/g, "_")}.tar`);
        rawTar(lower, c.lower);
        source = join(work, `hostile-${c.what.replace(/\W/g, "_")}-saved.tar`);
        await dockerSaveArchive([lower, upper], source, work);
      }
      const before = store.list().length;
      const trees = fs.readdirSync(join(store.dir, "trees")).length;
      await assert.rejects(store.import(source, "hostile:1"), (e: PlatformError) => {
        assert.equal(e.reason, "image_entry_refused");
        assert.match(e.message, c.message);
        return true;
      });
      assert.equal(store.list().length, before);
      assert.equal(fs.readdirSync(join(store.dir, "trees")).length, trees);
      assert.deepEqual(fs.readdirSync(join(store.dir, "tmp")), [], "the partial tree is removed");
      assert.deepEqual(fs.readdirSync(victim), ["passwd"], "nothing written or removed through a link");
    });
});

test("a start removes a scratch tree a killed build left, detaching its mounts first, never through them", (t) => {
  if (process.getuid?.() !== 0) return t.skip("mounting needs root");
  const data = join(work, "left-build");
  const dev = join(data, "images", "tmp", "b1", "rootfs", "dev");
  fs.mkdirSync(dev, { recursive: true });
  // Stands for the host's /dev that mmdebstrap binds into its tree.
  const host = join(work, "host-dev");
  fs.mkdirSync(host);
  fs.writeFileSync(join(host, "null"), "the host's\n");
  assert.equal(spawnSync("mount", ["--bind", host, dev]).status, 0);
  t.after(() => spawnSync("umount", ["--lazy", dev]));
  new ImageStore(data);
  assert.equal(fs.readFileSync(join(host, "null"), "utf8"), "the host's\n");
  assert.equal(fs.existsSync(join(data, "images", "tmp")), false);
  assert.deepEqual(mountPointsUnder(data), []);
});
