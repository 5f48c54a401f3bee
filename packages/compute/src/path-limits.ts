import { ComputeReason, PlatformError } from "@platform/errors";

/**
 * Linux's limits on the strings a path-taking syscall accepts, applied by
 * the domain before any filesystem or driver call, so an over-long path is
 * INVALID_ARGUMENT whatever the driver or the host's own path lengths.
 *
 * PATH_MAX counts the terminating NUL as the kernel does: a path of 4,095
 * bytes is the longest that opens, 4,096 is ENAMETOOLONG.
 */
export const PATH_MAX = 4096;
export const NAME_MAX = 255;
/** How much of a path (in characters) an error message quotes. */
export const QUOTED_PATH_CHARS = 128;

/**
 * Throws INVALID_ARGUMENT (reason path_too_long) unless `absolute`, a path
 * as the sandbox would hand it to the kernel, fits PATH_MAX and each of its
 * components NAME_MAX, counted in UTF-8 bytes.
 */
export function checkPathLimits(absolute: string, field: string): void {
  // UTF-16 length bounds UTF-8 bytes from below: a hostile 90 KB path stops here without being scanned twice.
  const bytes = absolute.length >= PATH_MAX ? PATH_MAX : Buffer.byteLength(absolute);
  if (bytes + 1 > PATH_MAX) {
    throw PlatformError.invalidArgument(
      `${field} is too long: ${Buffer.byteLength(absolute)} bytes in the sandbox, at most ${PATH_MAX - 1} (PATH_MAX)`,
      ComputeReason.pathTooLong,
    );
  }
  let start = 0;
  for (;;) {
    const end = absolute.indexOf("/", start);
    const stop = end === -1 ? absolute.length : end;
    // A component of more than NAME_MAX UTF-16 units may still fit in bytes only if it is shorter; measure it then.
    if (stop - start > NAME_MAX / 3 && Buffer.byteLength(absolute.slice(start, stop)) > NAME_MAX) {
      throw PlatformError.invalidArgument(
        `${field} has a component longer than NAME_MAX (${NAME_MAX} bytes): ${quotePath(absolute.slice(start, stop))}`,
        ComputeReason.pathTooLong,
      );
    }
    if (end === -1) return;
    start = end + 1;
  }
}

/** The absolute path a workspace path names inside the sandbox (before cleaning, as the kernel would see it). */
export function inSandboxView(path: string, mountPath: string): string {
  if (path.startsWith("/")) return path;
  return path === "" ? mountPath : `${mountPath}/${path}`;
}

/** A path for an error message: JSON-quoted, its first QUOTED_PATH_CHARS characters and "…" when longer. */
export function quotePath(path: string): string {
  if (path.length <= QUOTED_PATH_CHARS) return JSON.stringify(path);
  const cut = Array.from(path.slice(0, QUOTED_PATH_CHARS + 1))
    .slice(0, QUOTED_PATH_CHARS)
    .join("");
  return `${JSON.stringify(cut)}… (${path.length} characters)`;
}
