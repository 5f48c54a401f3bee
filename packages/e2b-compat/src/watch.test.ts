// The poll-based watch's comparison of two listings (no sandbox).
import assert from "node:assert/strict";
import { test } from "node:test";
import { EventType } from "@platform/gen/e2b/filesystem/filesystem_pb";
import type { FileEntry } from "./compute-port.ts";
import { changes, type Snapshot } from "./watch.ts";

const at = new Date("2026-01-01T00:00:00Z");
const file = (path: string, size = 1, mode = 0o644, modifiedAt = at): FileEntry => ({
  path,
  size,
  isDir: false,
  mode,
  modifiedAt,
});
const dir = (path: string): FileEntry => ({ path, size: 0, isDir: true, mode: 0o755, modifiedAt: at });
const snap = (...entries: FileEntry[]): Snapshot => new Map(entries.map((e) => [e.path, e]));
const names = (before: Snapshot, after: Snapshot) =>
  changes(before, after, "/home/user/w", false).map((e) => `${EventType[e.type]} ${e.name}`);

test("create, remove, write (size or mtime), chmod; a rename is remove + create; nothing for no change", () => {
  const before = snap(file("a"), file("b"), file("c"), file("d"), dir("sub"));
  const after = snap(
    file("a"),
    file("b", 2),
    file("c", 1, 0o644, new Date(at.getTime() + 1)),
    file("d", 1, 0o600),
    dir("sub"),
    file("sub/new"),
    file("e"),
  );
  assert.deepEqual(names(before, after), ["WRITE b", "WRITE c", "CHMOD d", "CREATE e", "CREATE sub/new"]);
  assert.deepEqual(names(snap(file("old")), snap(file("new"))), ["REMOVE old", "CREATE new"]);
  assert.deepEqual(names(before, before), []);
  // A file replaced by a directory of the same name.
  assert.deepEqual(names(snap(file("x")), snap(dir("x"))), ["REMOVE x", "CREATE x"]);
});

test("includeEntry carries the entry as envd's EntryInfo, with the sandbox path", () => {
  const [e] = changes(snap(), snap(file("sub/f.txt", 5)), "/home/user/w", true);
  assert.equal(e?.entry?.path, "/home/user/w/sub/f.txt");
  assert.equal(e?.entry?.name, "f.txt");
  assert.equal(e?.entry?.size, 5n);
});
