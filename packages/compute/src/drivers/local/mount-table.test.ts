// Loop devices found by their backing file among the attached ones, with
// real loop devices (root only, as the local driver).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { loopDevicesBackedBy } from "./mount-table.ts";

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

after(() => {
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
