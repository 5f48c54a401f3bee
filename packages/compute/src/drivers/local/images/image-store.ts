import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { formatImageRef, parseImageRef } from "./image-ref.ts";
import { layersOf } from "./sources.ts";
import { removeScratch } from "./scratch.ts";
import { normalizeTree, treeDigest } from "./tree.ts";
import { applyLayer } from "./unpack.ts";

/** A stored image: a read-only root filesystem, by name:tag, with its content digest. */
export interface StoredImage {
  /** `name:tag` */
  name: string;
  /** `sha256:<hex>` of the tree's manifest (tree.ts). */
  digest: string;
  sizeBytes: number;
  createdAt: string;
  /** Where it came from: `import <file>` or `debian <suite> <packages>`. */
  source: string;
}

/**
 * The local driver's images, under `<COMPUTE_DATA_DIR>/images/`:
 *   trees/<hex>/   an unpacked root filesystem, named by its digest, shared
 *                  by every sandbox on it (bound read-only), root-owned
 *   refs.json      name:tag → digest, size, time, source
 *   tmp/           imports and builds in progress (removed at start)
 * Imports run one at a time; a tree is removed once no name and no sandbox uses it.
 */
export class ImageStore {
  readonly dir: string;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    dataDir: string,
    private readonly log?: Logger,
  ) {
    this.dir = join(dataDir, "images");
    fs.mkdirSync(join(this.dir, "trees"), { recursive: true, mode: 0o711 });
    fs.chmodSync(this.dir, 0o711);
    // A build that compute's end cut short may have left mounts in its tree.
    if (!removeScratch(join(this.dir, "tmp")))
      log?.warn({ dir: join(this.dir, "tmp") }, "a stopped image build left mounts in its scratch tree; left in place");
  }

  list(): StoredImage[] {
    return Object.values(this.refs()).sort((a, b) => a.name.localeCompare(b.name));
  }

  /** The stored image of `name[:tag]`, if any (a malformed name has none). */
  find(name: string): StoredImage | undefined {
    let key: string;
    try {
      key = formatImageRef(parseImageRef(name));
    } catch {
      return undefined;
    }
    return this.refs()[key];
  }

  /** The directory of a digest's tree (sha256:<hex>). */
  treeOf(digest: string): string {
    return join(this.dir, "trees", digest.replace(/^sha256:/, ""));
  }

  /**
   * Imports an OCI layout / docker save archive / root filesystem tarball
   * (sources.ts) as `name`, replacing what the name pointed to (a tree still
   * used by a sandbox stays until it is not).
   */
  async import(source: string, name: string, inUse: () => Set<string> = () => new Set()): Promise<StoredImage> {
    const ref = formatImageRef(parseImageRef(name));
    return this.serial(async () => {
      const scratch = join(this.dir, "tmp", randomUUID());
      fs.mkdirSync(scratch, { recursive: true, mode: 0o700 });
      try {
        const root = join(scratch, "rootfs");
        fs.mkdirSync(root, { mode: 0o755 });
        for (const layer of await layersOf(source, scratch)) await applyLayer(root, layer.file, layer.name);
        return this.commit(root, ref, `import ${source}`, inUse);
      } finally {
        fs.rmSync(scratch, { recursive: true, force: true });
      }
    });
  }

  /** Stores an already unpacked tree (a build's output) as `name`; the tree is moved into the store. */
  async adopt(
    root: string,
    name: string,
    source: string,
    inUse: () => Set<string> = () => new Set(),
  ): Promise<StoredImage> {
    const ref = formatImageRef(parseImageRef(name));
    return this.serial(async () => this.commit(root, ref, source, inUse));
  }

  /** A scratch directory for a build (removed with tmp/ at the next start if left). */
  scratch(): string {
    const dir = join(this.dir, "tmp", randomUUID());
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  /**
   * Removes a name; FAILED_PRECONDITION while a sandbox runs on its tree (inUse), NOT_FOUND when unknown.
   * Its tree goes unless another name or a sandbox (held: warm ones too) still has it.
   */
  async remove(name: string, inUse: Set<string>, held: Set<string> = inUse): Promise<StoredImage> {
    const ref = formatImageRef(parseImageRef(name));
    return this.serial(async () => {
      const refs = this.refs();
      const image = refs[ref];
      if (!image) throw PlatformError.notFound(`no image ${ref}`, "image_not_found");
      if (inUse.has(image.digest))
        throw PlatformError.failedPrecondition(`image ${ref} is used by a sandbox`, "image_in_use");
      delete refs[ref];
      this.writeRefs(refs);
      this.collect(new Set([...inUse, ...held]));
      return image;
    });
  }

  /** Removes trees no name and no sandbox uses. */
  collect(inUse: Set<string>): string[] {
    const named = new Set(Object.values(this.refs()).map((i) => i.digest.replace(/^sha256:/, "")));
    const removed: string[] = [];
    for (const hex of fs.readdirSync(join(this.dir, "trees"))) {
      if (named.has(hex) || inUse.has(`sha256:${hex}`)) continue;
      fs.rmSync(join(this.dir, "trees", hex), { recursive: true, force: true });
      removed.push(`sha256:${hex}`);
    }
    if (removed.length > 0) this.log?.info({ removed }, "image trees no name or sandbox uses removed");
    return removed;
  }

  private async commit(root: string, ref: string, source: string, inUse: () => Set<string>): Promise<StoredImage> {
    normalizeTree(root);
    const { digest, sizeBytes } = treeDigest(root);
    const tree = this.treeOf(digest);
    // The same content under another name (or again): one tree.
    if (!fs.existsSync(tree)) fs.renameSync(root, tree);
    else fs.rmSync(root, { recursive: true, force: true });
    const image: StoredImage = { name: ref, digest, sizeBytes, createdAt: new Date().toISOString(), source };
    const refs = this.refs();
    refs[ref] = image;
    this.writeRefs(refs);
    this.collect(inUse());
    return image;
  }

  private refs(): Record<string, StoredImage> {
    try {
      return JSON.parse(fs.readFileSync(join(this.dir, "refs.json"), "utf8")) as Record<string, StoredImage>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
      throw PlatformError.internal("the image store's refs.json is unreadable", err);
    }
  }

  private writeRefs(refs: Record<string, StoredImage>): void {
    const tmp = join(this.dir, `refs.json.${process.pid}`);
    fs.writeFileSync(tmp, `${JSON.stringify(refs, null, 2)}\n`, { mode: 0o644 });
    fs.renameSync(tmp, join(this.dir, "refs.json"));
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }
}
