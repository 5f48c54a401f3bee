import * as fs from "node:fs";
import { join } from "node:path";
import { PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { buildDebianImage, type DebianBuild } from "./debian-build.ts";
import { HOST_IMAGE, parseImageRef } from "./image-ref.ts";
import type { ImageStore, StoredImage } from "./image-store.ts";

/** The image a sandbox runs on: a stored tree (the host mode has none). */
export interface RootImage {
  /** name:tag asked for */
  ref: string;
  digest: string;
  /** The tree on the host. */
  tree: string;
}

export interface ImageListing {
  images: StoredImage[];
  /** SANDBOX_IMAGE. */
  defaultImage: string;
  /** Whether a sandbox without an image of its own runs on the host's /usr (the default image is not stored). */
  defaultIsHost: boolean;
}

export interface LocalImagesHooks {
  /** Digests of the trees sandboxes (not warm ones) run on now. */
  inUse(): Set<string>;
  /** Digests of every tree any sandbox runs on, warm ones included (never deleted). */
  held(): Set<string>;
  /** Ends the warm sandboxes of a digest before its tree may go. */
  dropWarm(digest: string): Promise<void>;
  /** A name now points to this image (imported or built). */
  imported?(image: StoredImage): void;
}

/**
 * The local driver's images: which tree an `image` means, and the store's
 * import, build, list and remove with the driver's sandboxes in mind. An
 * empty image is SANDBOX_IMAGE; `host` (HOST_IMAGE) is the host's /usr; the
 * default image falls back to the host's /usr while it is not stored (so a
 * machine without images works as before); any other image must be stored
 * (unless refuseUnknown is off: then it runs on the host's /usr, logged).
 */
export class LocalImages {
  constructor(
    readonly store: ImageStore,
    readonly defaultImage: string,
    private readonly hooks: LocalImagesHooks,
    private readonly log?: Logger,
    /** An image neither stored nor the default: refused (INVALID_ARGUMENT), or run on the host's /usr as before images. */
    private readonly refuseUnknown = true,
  ) {}

  private readonly warned = new Set<string>();

  /** The tree `image` runs on, or undefined for the host's /usr; INVALID_ARGUMENT listing the images when unknown. */
  resolve(image: string): RootImage | undefined {
    const wanted = image || this.defaultImage || HOST_IMAGE;
    if (wanted === HOST_IMAGE) return undefined;
    const found = this.store.find(wanted);
    if (found) return { ref: found.name, digest: found.digest, tree: this.store.treeOf(found.digest) };
    if (wanted === this.defaultImage) return undefined;
    if (!this.refuseUnknown) {
      if (!this.warned.has(wanted) && this.warned.size < 100) {
        this.warned.add(wanted);
        this.log?.warn({ image: wanted }, "image not stored: the sandbox runs on the host's /usr");
      }
      return undefined;
    }
    throw PlatformError.invalidArgument(
      `unknown image ${JSON.stringify(wanted.slice(0, 200))}; available: ${this.available().join(", ")}`,
      "image_not_found",
    );
  }

  /** INVALID_ARGUMENT when a sandbox cannot run on `image` (resolve's rule). */
  check(image: string): void {
    this.resolve(image);
  }

  /** What an agent may name: the stored images and `host`. */
  available(): string[] {
    return [...this.store.list().map((i) => i.name), HOST_IMAGE];
  }

  list(): ImageListing {
    const images = this.store.list();
    return {
      images,
      defaultImage: this.defaultImage,
      defaultIsHost: !this.defaultImage || this.defaultImage === HOST_IMAGE || !this.store.find(this.defaultImage),
    };
  }

  async import(source: string, name: string): Promise<StoredImage> {
    const image = await this.store.import(source, name, () => this.hooks.held());
    this.hooks.imported?.(image);
    return image;
  }

  async build(build: DebianBuild): Promise<StoredImage> {
    const image = await buildDebianImage(this.store, build, () => this.hooks.held());
    this.hooks.imported?.(image);
    return image;
  }

  /** Removes a name; FAILED_PRECONDITION `image_in_use` while a sandbox runs on it. */
  async remove(name: string): Promise<StoredImage> {
    parseImageRef(name);
    const image = this.store.find(name);
    if (!image) throw PlatformError.notFound(`no image ${name.slice(0, 200)}`, "image_not_found");
    const inUse = this.hooks.inUse();
    if (inUse.has(image.digest))
      throw PlatformError.failedPrecondition(`image ${image.name} is used by a sandbox`, "image_in_use");
    const otherNames = this.store.list().some((i) => i.digest === image.digest && i.name !== image.name);
    if (!otherNames) await this.hooks.dropWarm(image.digest);
    const held = this.hooks.held();
    if (held.has(image.digest) && !otherNames)
      this.log?.warn({ image: image.name }, "a sandbox still holds the removed image's tree: it is removed later");
    return this.store.remove(name, inUse, held);
  }

  /** The image a sandbox recorded (image.json in its directory), if it runs on one. */
  static recorded(sandboxDir: string): RootImage | undefined {
    try {
      return JSON.parse(fs.readFileSync(join(sandboxDir, "image.json"), "utf8")) as RootImage;
    } catch {
      return undefined;
    }
  }

  /** Records the image a sandbox runs on, so a restart of compute knows its tree is in use. */
  static record(sandboxDir: string, image: RootImage | undefined): void {
    const file = join(sandboxDir, "image.json");
    if (!image) fs.rmSync(file, { force: true });
    else fs.writeFileSync(file, JSON.stringify(image), { mode: 0o644 });
  }

  logUnstoredDefault(): void {
    if (this.list().defaultIsHost && this.defaultImage !== HOST_IMAGE)
      this.log?.info(
        { image: this.defaultImage },
        "the default sandbox image is not stored: sandboxes without an image run on the host's /usr (import or build it: platform images)",
      );
  }
}
