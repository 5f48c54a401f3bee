// Loop devices found by their backing file among the attached ones, and by
// where they are mounted, with real loop devices (root only, as the local driver).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loopDeviceMountedAt, loopDevicesBackedBy } from "./mount-table.ts";

const dir = fs.mkdtempSync(join(tmpdir(), "mount-table-"));
const attached: string[] = [];

function attach(file: string): string {
  const device = execFileSync("losetup", ["-f", "--show", file], { encoding: "utf8" }).trim();
  attached.push(device);
  return device;
}

function detach(device: string): void {
  execFileSync("losetup", ["-d", device]);
  attached.splice(attached.indexOf(device), 1);
}

const mounted: string[] = [];

after(() => {
  for (const point of mounted) execFileSync("umount", [point]);
  for (const device of [...attached]) detach(device);
  fs.rmSync(dir, { recursive: true, force: true });
});

test("an attached image is found by its file and by a directory above it, and no longer once detached", () => {
  const a = join(dir, "a.img");
  const b = join(dir, "sub", "b.img");
  fs.mkdirSync(join(dir, "sub"));
  fs.writeFileSync(a, Buffer.alloc(1024 * 1024));
  fs.writeFileSync(b, Buffer.alloc(1024 * 1024));
  const da = attach(a);
  const db = attach(b);
  assert.deepEqual(loopDevicesBackedBy(a), [da]);
  assert.deepEqual(loopDevicesBackedBy(b), [db]);
  assert.deepEqual(loopDevicesBackedBy(dir).sort(), [da, db].sort());
  assert.deepEqual(loopDevicesBackedBy(join(dir, "sub")), [db]);
  // A name that only starts like the directory is not below it.
  assert.deepEqual(loopDevicesBackedBy(join(dir, "su")), []);
  detach(db);
  assert.deepEqual(loopDevicesBackedBy(b), []);
  assert.deepEqual(loopDevicesBackedBy(dir), [da]);
});

test("an image deleted while attached is still found by its former name", () => {
  const c = join(dir, "c.img");
  fs.writeFileSync(c, Buffer.alloc(1024 * 1024));
  const dc = attach(c);
  fs.rmSync(c);
  assert.deepEqual(loopDevicesBackedBy(c), [dc]);
  detach(dc);
  assert.deepEqual(loopDevicesBackedBy(c), []);
});

test("the device mounted at a directory is found from it while it holds the file, by the file's new name after a rename", () => {
  const image = join(dir, "d.img");
  fs.writeFileSync(image, Buffer.alloc(8 * 1024 * 1024));
  execFileSync("mkfs.ext4", ["-q", "-F", image]);
  const device = attach(image);
  const point = join(dir, "d");
  const empty = join(dir, "empty");
  fs.mkdirSync(point);
  fs.mkdirSync(empty);
  execFileSync("mount", [device, point]);
  mounted.push(point);
  assert.equal(loopDeviceMountedAt(point, image), device);
  // Another file, a directory nothing is mounted at, one that does not exist: none.
  const other = join(dir, "other.img");
  fs.writeFileSync(other, "");
  assert.equal(loopDeviceMountedAt(point, other), undefined);
  assert.equal(loopDeviceMountedAt(empty, image), undefined);
  assert.equal(loopDeviceMountedAt(join(dir, "absent"), image), undefined);
  const renamed = join(dir, "e.img");
  fs.renameSync(image, renamed);
  assert.equal(loopDeviceMountedAt(point, renamed), device);
  assert.equal(loopDeviceMountedAt(point, image), undefined);
});
