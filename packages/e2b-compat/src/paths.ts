import { posix } from "node:path";
import { PlatformError } from "@platform/errors";

/**
 * E2B's home directory: the sandboxes made here mount their workspace there,
 * so the SDK's default paths (`/home/user/x`, or `x` relative to it) are
 * workspace paths. Other paths are refused (compute's path rule 1 would
 * refuse them too: a sandbox's files are its workspace's).
 */
export const HOME = "/home/user";

/** An E2B path as the sandbox sees it: absolute, cleaned, HOME or inside it. */
export function sandboxPath(path: string): string {
  if (path.includes("\0")) throw PlatformError.invalidArgument("path contains a NUL byte", "invalid_argument");
  const abs = posix.normalize(path.startsWith("/") ? path : posix.join(HOME, path)).replace(/\/+$/, "") || "/";
  if (abs !== HOME && !abs.startsWith(`${HOME}/`))
    throw PlatformError.invalidArgument(
      `path ${JSON.stringify(path.slice(0, 200))} is outside the workspace ${HOME}`,
      "path_escapes",
    );
  return abs;
}
