import type { Logger } from "pino";
import { type DebianBuild, debianBuildAvailable, validateBuild } from "./debian-build.ts";
import { HOST_IMAGE } from "./image-ref.ts";
import type { StoredImage } from "./image-store.ts";
import type { LocalImages } from "./local-images.ts";

/** A build of the default image running in the background of a serving compute. */
export interface DefaultImageBuild {
  /** The stored image; undefined when the build failed or was stopped (both logged). */
  readonly done: Promise<StoredImage | undefined>;
  /** Ends the build (compute stopping): nothing is stored, the next start tries again. */
  stop(): Promise<void>;
}

export interface DefaultImageOptions {
  /** How the image is made; the store's Debian build (mmdebstrap) unless a test brings its own. */
  build?: (b: DebianBuild) => Promise<StoredImage>;
  /** Why no build can run here (undefined: it can); debianBuildAvailable unless a test says. */
  unavailable?: () => string | undefined;
}

/** mmdebstrap's own step lines ("I: downloading packages with apt..."), not apt's and dpkg's chatter. */
const STEP = /^I: /;

/**
 * Builds SANDBOX_IMAGE from Debian packages in the background when it is not
 * stored (issue 22: a default image with a shell, coreutils, Python 3,
 * Node.js and git on first use, without a registry). Sandboxes made before
 * it is stored run on the host's /usr, as without images; the driver's
 * `imported` hook moves the warm pool to the image once it is. Undefined
 * when nothing is to be built (no packages, `host`, stored, or no build
 * possible here: logged). INVALID_ARGUMENT at once for a bad package name.
 */
export function buildDefaultImage(
  images: LocalImages,
  packages: readonly string[],
  log: Logger,
  options: DefaultImageOptions = {},
): DefaultImageBuild | undefined {
  const name = images.defaultImage;
  if (packages.length === 0 || !name || name === HOST_IMAGE) return undefined;
  validateBuild({ name, packages: [...packages] });
  if (images.store.find(name)) return undefined;
  const unavailable = (options.unavailable ?? debianBuildAvailable)();
  if (unavailable) {
    log.warn(
      { image: name },
      `the default sandbox image cannot be built here (${unavailable}): sandboxes run on the host's /usr`,
    );
    return undefined;
  }
  const build = options.build ?? ((b: DebianBuild) => images.build(b));
  const abort = new AbortController();
  const started = performance.now();
  log.info(
    { image: name, packages },
    `building the default sandbox image ${name} from Debian packages (${packages.join(", ")}) in the background; sandboxes run on the host's /usr until it is stored`,
  );
  const done = build({
    name,
    packages: [...packages],
    signal: abort.signal,
    background: true,
    onProgress: (line) => {
      if (STEP.test(line)) log.info({ image: name }, `default sandbox image: ${line.slice(3)}`);
    },
  }).then(
    (image) => {
      log.info(
        { image: name, digest: image.digest, sizeBytes: image.sizeBytes },
        `the default sandbox image ${name} is stored (${(image.sizeBytes / 2 ** 20).toFixed(0)} MiB in ${((performance.now() - started) / 1000).toFixed(0)} s): new sandboxes run on it`,
      );
      return image;
    },
    (err: unknown) => {
      if (abort.signal.aborted)
        log.info({ image: name }, "the default sandbox image's build stopped; the next start tries again");
      else
        log.warn(
          { image: name, err },
          "the default sandbox image could not be built: sandboxes run on the host's /usr (platform images build, or the next start, tries again)",
        );
      return undefined;
    },
  );
  return {
    done,
    async stop() {
      abort.abort();
      await done;
    },
  };
}
