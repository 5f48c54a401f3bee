import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";

/** Files of /etc the driver binds its own per-sandbox copies onto: they must exist as regular files. */
export const ETC_MOUNT_POINTS = ["passwd", "group", "hosts", "hostname"];

/**
 * Makes an unpacked tree fit to be a sandbox's root: /etc and the files the
 * driver binds over exist as plain files (a link there would be followed when
 * binding), setuid and setgid bits are dropped everywhere (the tree lies on
 * the host, where such a file of an untrusted image would be a way to root),
 * and nothing but directories, regular files and symbolic links is kept.
 */
export function normalizeTree(root: string): void {
  fs.chmodSync(root, 0o755);
  const etc = join(root, "etc");
  const st = fs.lstatSync(etc, { throwIfNoEntry: false });
  if (st && !st.isDirectory()) fs.rmSync(etc, { force: true });
  fs.mkdirSync(etc, { recursive: true, mode: 0o755 });
  for (const name of ETC_MOUNT_POINTS) {
    const file = join(etc, name);
    const f = fs.lstatSync(file, { throwIfNoEntry: false });
    if (f?.isFile()) continue;
    if (f) fs.rmSync(file, { recursive: true, force: true });
    fs.writeFileSync(file, "", { mode: 0o644 });
  }
  walk(root, "", (abs, _rel, s) => {
    if (s.isSymbolicLink()) return;
    if (!s.isFile() && !s.isDirectory()) {
      fs.rmSync(abs, { force: true });
      return;
    }
    if (s.mode & 0o6000) fs.chmodSync(abs, s.mode & 0o1777);
  });
}

/**
 * The tree's content digest: sha256 over its manifest, one line per entry in
 * name order (type, mode, name, then the file's sha256 and size or the link's
 * target). Two imports of the same files get the same digest, and share one tree.
 */
export function treeDigest(root: string): { digest: string; sizeBytes: number } {
  const manifest = createHash("sha256");
  let sizeBytes = 0;
  walk(root, "", (abs, rel, s) => {
    const mode = (s.mode & 0o7777).toString(8);
    if (s.isSymbolicLink()) manifest.update(`l ${mode} ${rel} ${fs.readlinkSync(abs)}\n`);
    else if (s.isDirectory()) manifest.update(`d ${mode} ${rel}\n`);
    else if (s.isFile()) {
      manifest.update(`f ${mode} ${rel} ${s.size} ${fileSha256(abs)}\n`);
      sizeBytes += s.size;
    }
  });
  return { digest: `sha256:${manifest.digest("hex")}`, sizeBytes };
}

function fileSha256(file: string): string {
  const hash = createHash("sha256");
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
    }
  } finally {
    fs.closeSync(fd);
  }
  return hash.digest("hex");
}

/** Depth first, names sorted, never following a link. */
function walk(root: string, rel: string, visit: (abs: string, rel: string, st: fs.Stats) => void): void {
  const dir = rel === "" ? root : join(root, rel);
  for (const name of fs.readdirSync(dir).sort()) {
    const r = rel === "" ? name : `${rel}/${name}`;
    const abs = join(root, r);
    const st = fs.lstatSync(abs);
    visit(abs, r, st);
    if (st.isDirectory()) walk(root, r, visit);
  }
}
