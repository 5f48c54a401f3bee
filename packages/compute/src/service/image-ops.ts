import { ComputeReason, PlatformError } from "@platform/errors";
import type { ImageInfo, SandboxDriver } from "../driver.ts";

export interface ImageListing {
  images: ImageInfo[];
  defaultImage: string;
  defaultIsHost: boolean;
  /** The driver takes any name (no store of its own: a registry's images). */
  anyImage: boolean;
}

const MAX_PATH_BYTES = 4095;

/**
 * The image RPCs (issue 22) over the driver's store: validation here, the
 * store's rules in the driver. A driver without a store (Kubernetes: a
 * registry's images) lists none, takes any name, and refuses the rest.
 */
export class ImageOps {
  constructor(
    private readonly driver: SandboxDriver,
    private readonly defaultImage: string,
  ) {}

  /** Before a sandbox is recorded: INVALID_ARGUMENT listing the images when it could not run on `image`. */
  check(image: string): void {
    this.driver.images?.check(image);
  }

  list(): ImageListing {
    const store = this.driver.images;
    if (!store) return { images: [], defaultImage: this.defaultImage, defaultIsHost: false, anyImage: true };
    return { ...store.list(), anyImage: false };
  }

  async import(name: string, path: string): Promise<ImageInfo> {
    const store = this.store();
    if (!path.startsWith("/")) throw invalid("path must be an absolute path on compute's host");
    if (Buffer.byteLength(path) > MAX_PATH_BYTES || path.includes("\0")) throw invalid("path is too long");
    return store.import(path, required("name", name));
  }

  remove(name: string): Promise<ImageInfo> {
    return this.store().remove(required("name", name));
  }

  build(name: string, packages: string[], suite: string): Promise<ImageInfo> {
    return this.store().build({ name: required("name", name), packages, suite: suite || undefined });
  }

  private store() {
    const store = this.driver.images;
    if (!store)
      throw PlatformError.failedPrecondition(
        `the ${this.driver.name} driver has no image store: its images come from a registry`,
        "images_not_stored",
      );
    return store;
  }
}

function invalid(message: string): PlatformError {
  return PlatformError.invalidArgument(message, ComputeReason.invalidArgument);
}

function required(field: string, value: string): string {
  if (!value) throw invalid(`${field} is required`);
  return value;
}
