import * as fs from "node:fs";
import { posix } from "node:path";
import { PlatformError } from "@platform/errors";
import { extract, list, type ReadEntry } from "tar";

/** Entry types a layer may hold; anything else (devices, FIFOs, GNU extensions) is refused. */
const ALLOWED = new Set(["File", "OldFile", "ContiguousFile", "Directory", "SymbolicLink", "Link"]);
const WHITEOUT = ".wh.";
const OPAQUE = ".wh..wh..opq";

interface LayerEntry {
  path: string;
  type: string;
  linkpath: string;
}

/** Refused: an import stops at the first hostile or unsupported entry, naming it and the layer. */
function hostile(layer: string, entry: string, why: string): PlatformError {
  return PlatformError.invalidArgument(
    `image layer ${layer}: entry ${JSON.stringify(entry.slice(0, 200))} refused: ${why}`,
    "image_entry_refused",
  );
}

/**
 * A tar name made relative to the image root: `./` and trailing `/` dropped;
 * absolute names and any `..` component are refused (never rewritten, as
 * tar does, so a hostile layer is not half-applied).
 */
function cleanName(layer: string, raw: string): string {
  if (raw.startsWith("/")) throw hostile(layer, raw, "absolute name");
  const parts = raw.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw hostile(layer, raw, "'..' in its name");
  return parts.join("/");
}

/** Reads a layer's entries (one pass, nothing written) and checks each name, type and link target. */
async function readLayer(file: string, layer: string): Promise<LayerEntry[]> {
  const entries: LayerEntry[] = [];
  let refused: PlatformError | undefined;
  await listOrRefuse(file, {
    onReadEntry: (e: ReadEntry) => {
      if (refused) return;
      try {
        entries.push(checkEntry(layer, e));
      } catch (err) {
        refused = err as PlatformError;
      }
    },
  });
  if (refused) throw refused;
  return entries;
}

function checkEntry(layer: string, e: ReadEntry): LayerEntry {
  const path = cleanName(layer, e.path);
  const type = String(e.type);
  if (type === "CharacterDevice" || type === "BlockDevice") throw hostile(layer, e.path, "device node");
  if (type === "FIFO") throw hostile(layer, e.path, "FIFO");
  if (!ALLOWED.has(type)) throw hostile(layer, e.path, `unsupported entry type ${type}`);
  const linkpath = e.linkpath ?? "";
  if (type === "SymbolicLink") {
    if (linkpath === "") throw hostile(layer, e.path, "symbolic link without a target");
    // An absolute target means a path of the image (the sandbox's root); a relative one must stay under it.
    if (!linkpath.startsWith("/")) {
      const resolved = posix.normalize(posix.join(posix.dirname(path), linkpath));
      if (resolved === ".." || resolved.startsWith("../"))
        throw hostile(
          layer,
          e.path,
          `symbolic link to ${JSON.stringify(linkpath.slice(0, 200))} points out of the root`,
        );
    }
  }
  if (type === "Link") {
    if (linkpath.startsWith("/")) throw hostile(layer, e.path, "hard link to an absolute name");
    const target = linkpath.split("/").filter((p) => p !== "" && p !== ".");
    if (target.includes("..") || target.length === 0)
      throw hostile(layer, e.path, `hard link to ${JSON.stringify(linkpath.slice(0, 200))} points out of the root`);
    return { path, type, linkpath: target.join("/") };
  }
  const base = posix.basename(path);
  if (base.startsWith(WHITEOUT) && base !== OPAQUE) {
    const hidden = base.slice(WHITEOUT.length);
    if (hidden === "" || hidden === "." || hidden === "..") throw hostile(layer, e.path, "whiteout of no name");
  }
  return { path, type, linkpath };
}

/**
 * Whether every directory above `rel` (inside root) is a real directory:
 * never a symbolic link, which a later write or removal would follow out of
 * the root. `layerTypes` holds what this layer made so far, which wins over
 * the tree below.
 */
function parentsAreDirs(root: string, rel: string, layerTypes: Map<string, string>): string | undefined {
  const parts = rel.split("/");
  for (let i = 1; i < parts.length; i++) {
    const prefix = parts.slice(0, i).join("/");
    const own = layerTypes.get(prefix);
    if (own !== undefined) {
      if (own !== "Directory") return prefix;
      continue;
    }
    const st = fs.lstatSync(posix.join(root, prefix), { throwIfNoEntry: false });
    if (st && !st.isDirectory()) return prefix;
  }
  return undefined;
}

/** Removes root/rel (never through a link: its parents are checked first). */
function removeUnder(root: string, rel: string): void {
  fs.rmSync(posix.join(root, rel), { recursive: true, force: true });
}

/**
 * Applies one layer (a tar file, gzip or plain) onto root, as OCI's image
 * spec says: the layer's whiteouts first remove what the layers below put
 * there (`.wh.<name>`: that entry; `.wh..wh..opq`: everything in that
 * directory), then its other entries are written, owned by root (owners in
 * the archive are not kept), setuid and setgid bits dropped. A hostile
 * entry refuses the whole layer before anything of it is written.
 */
export async function applyLayer(root: string, file: string, layer: string): Promise<void> {
  const entries = await readLayer(file, layer);
  // Whiteouts act on the layers below, so they go first; their parents must be real directories.
  const none = new Map<string, string>();
  for (const entry of entries) {
    const base = posix.basename(entry.path);
    if (!base.startsWith(WHITEOUT)) continue;
    const dir = posix.dirname(entry.path);
    const through = parentsAreDirs(root, entry.path, none);
    if (through !== undefined) throw hostile(layer, entry.path, `whiteout through the non-directory ${through}`);
    if (base === OPAQUE) {
      const abs = posix.join(root, dir);
      const st = fs.lstatSync(abs, { throwIfNoEntry: false });
      if (st?.isDirectory()) for (const name of fs.readdirSync(abs)) removeUnder(root, posix.join(dir, name));
    } else removeUnder(root, posix.join(dir, base.slice(WHITEOUT.length)));
  }
  // Nothing is written through a link: every parent of an entry (and of a hard link's target) is a directory.
  const layerTypes = new Map<string, string>();
  for (const entry of entries) {
    if (entry.path === "" || posix.basename(entry.path).startsWith(WHITEOUT)) continue;
    const through = parentsAreDirs(root, entry.path, layerTypes);
    if (through !== undefined) throw hostile(layer, entry.path, `written through the non-directory ${through}`);
    if (entry.type === "Link") {
      const via = parentsAreDirs(root, entry.linkpath, layerTypes);
      if (via !== undefined) throw hostile(layer, entry.path, `hard link through the non-directory ${via}`);
    }
    layerTypes.set(entry.path, entry.type);
  }
  // tar writes an absolute symlink target relative (it strips the root): the image means its own root, so
  // such links are made again with their target as the archive gave it, once the layer is written.
  const absoluteLinks = new Map<string, string>();
  const refused: string[] = [];
  await extract({
    file,
    cwd: root,
    preserveOwner: false,
    unlink: true,
    onwarn: (code: string, message: string, data) => {
      const entry = (data as { entry?: ReadEntry }).entry;
      if (code !== "TAR_ENTRY_INFO") refused.push(`${entry?.path ?? "?"}: ${message}`);
    },
    filter: (path: string, entry) => {
      const name = path
        .split("/")
        .filter((p) => p !== "" && p !== ".")
        .join("/");
      if (name === "" || posix.basename(name).startsWith(WHITEOUT)) return false;
      const e = entry as ReadEntry;
      if (typeof e.mode === "number") e.mode &= 0o1777;
      if (e.type === "SymbolicLink" && e.linkpath?.startsWith("/")) absoluteLinks.set(name, e.linkpath);
      else absoluteLinks.delete(name);
      return true;
    },
  });
  if (refused.length > 0) throw hostile(layer, refused[0] as string, "not extracted");
  for (const [name, target] of absoluteLinks) {
    const abs = posix.join(root, name);
    if (!fs.lstatSync(abs, { throwIfNoEntry: false })?.isSymbolicLink()) continue;
    fs.unlinkSync(abs);
    fs.symlinkSync(target, abs);
  }
}

/** tar's list of a file the caller named; a file tar cannot read is the caller's error (INVALID_ARGUMENT), not ours. */
export async function listOrRefuse(file: string, options: Omit<Parameters<typeof list>[0], "file">): Promise<void> {
  try {
    await list({ ...options, file, strict: true } as never);
  } catch (err) {
    if (err instanceof PlatformError) throw err;
    throw PlatformError.invalidArgument(
      `${file.slice(0, 200)} is not a readable tar archive: ${String((err as Error).message).slice(0, 200)}`,
      "image_source_invalid",
    );
  }
}
