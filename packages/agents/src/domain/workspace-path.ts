import { posix } from "node:path";
import { ComputeReason, PlatformError } from "@platform/errors";

/** Where compute mounts a session's workspace (the agents service never asks for another). */
export const WORKSPACE_MOUNT = "/workspace";
/** Linux's PATH_MAX (counting the NUL) and NAME_MAX, as compute checks them (its path-limits.ts). */
const PATH_MAX = 4096;
const NAME_MAX = 255;

/**
 * The specification's workspace path rule 1, applied here before compute is
 * called, with compute's own reasons: the path is lexically cleaned, and
 * what still climbs out of the workspace with `..` is invalid_argument
 * (path_escapes_mount); so is an absolute path outside /workspace (agents
 * and people often write "/workspace/x", which is accepted), one longer than
 * PATH_MAX in the sandbox or with a component longer than NAME_MAX
 * (path_too_long). Symlinks (rule 2) can only be judged inside the
 * workspace: compute answers permission_denied for one that leads out.
 *
 * Returns the path relative to the workspace ("" is the workspace root).
 */
export function cleanSessionPath(input: string, field = "path"): string {
  const inSandbox = input.startsWith("/") ? input : input === "" ? WORKSPACE_MOUNT : `${WORKSPACE_MOUNT}/${input}`;
  // The UTF-16 length bounds the UTF-8 bytes from below: a hostile 1 MB path stops here unscanned.
  if (inSandbox.length >= PATH_MAX || Buffer.byteLength(inSandbox) + 1 > PATH_MAX) {
    throw PlatformError.invalidArgument(
      `${field} is too long: at most ${PATH_MAX - 1} bytes in the sandbox`,
      ComputeReason.pathTooLong,
    );
  }
  for (const part of inSandbox.split("/")) {
    if (Buffer.byteLength(part) > NAME_MAX)
      throw PlatformError.invalidArgument(
        `${field} has a component longer than ${NAME_MAX} bytes`,
        ComputeReason.pathTooLong,
      );
  }
  if (input.startsWith("/")) {
    const cleaned = posix.normalize(input).replace(/\/+$/, "") || "/";
    if (cleaned === WORKSPACE_MOUNT) return "";
    if (!cleaned.startsWith(`${WORKSPACE_MOUNT}/`))
      throw PlatformError.invalidArgument(`${field} is outside ${WORKSPACE_MOUNT}`, ComputeReason.pathEscapes);
    return cleaned.slice(WORKSPACE_MOUNT.length + 1);
  }
  const cleaned = posix.normalize(input === "" ? "." : input).replace(/\/+$/, "");
  if (cleaned === "." || cleaned === "") return "";
  if (cleaned === ".." || cleaned.startsWith("../"))
    throw PlatformError.invalidArgument(`${field} escapes the workspace`, ComputeReason.pathEscapes);
  return cleaned;
}

/** A file's path: cleaned, and not the workspace root itself. */
export function cleanSessionFilePath(input: string): string {
  if (input === "") throw PlatformError.invalidArgument("path is required");
  const cleaned = cleanSessionPath(input);
  if (cleaned === "") throw PlatformError.invalidArgument("path names the workspace, not a file");
  return cleaned;
}
