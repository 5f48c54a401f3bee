import { posix } from "node:path";
import { cleanWorkspacePath } from "@platform/compute";

/**
 * E2B's home directory: the sandboxes made here mount their workspace there,
 * so the SDK's default paths (`/home/user/x`, or `x` relative to it) are
 * workspace paths. Paths outside it are refused by compute's path rule 1.
 */
export const HOME = "/home/user";

/** An E2B path as compute's workspace-relative path ("" is the workspace root). */
export function workspacePath(path: string): string {
  return cleanWorkspacePath(absolute(path), HOME);
}

/** An E2B path as the sandbox sees it (absolute, cleaned, inside HOME). */
export function sandboxPath(path: string): string {
  const rel = workspacePath(path);
  return rel === "" ? HOME : `${HOME}/${rel}`;
}

function absolute(path: string): string {
  return path.startsWith("/") ? path : posix.join(HOME, path);
}
