import { posix } from "node:path";
import { ComputeReason, PlatformError } from "@platform/errors";
import { checkPathLimits, inSandboxView, quotePath } from "./path-limits.ts";

/**
 * Path rule 1 of the spec, shared by every driver: lexically clean a
 * workspace path and reject what still climbs with `..`.
 *
 * Returns the path relative to mount_path, "/"-separated, without a leading
 * "/" ("" is the workspace root). An absolute path is accepted when it lies
 * inside mount_path (agents often pass "/workspace/x"); any other absolute
 * path escapes the mount. Symlinks (rule 2) are the driver's job.
 *
 * Before cleaning, the path as the sandbox would pass it to the kernel
 * (mount_path + "/" + path) must fit PATH_MAX and NAME_MAX: cleaning only
 * shortens, so what a driver opens fits them too.
 */
export function cleanWorkspacePath(input: string, mountPath: string): string {
  if (input.includes("\0")) {
    throw PlatformError.invalidArgument("path contains a NUL byte", ComputeReason.invalidArgument);
  }
  checkPathLimits(inSandboxView(input, mountPath.replace(/\/+$/, "")), "path");
  if (input.startsWith("/")) {
    const cleaned = posix.normalize(input).replace(/\/+$/, "") || "/";
    const mount = mountPath.replace(/\/+$/, "") || "/";
    if (cleaned === mount) return "";
    if (mount === "/") return cleaned.slice(1);
    if (!cleaned.startsWith(`${mount}/`)) {
      throw PlatformError.invalidArgument(
        `path ${quotePath(input)} is outside ${quotePath(mount)}`,
        ComputeReason.pathEscapes,
      );
    }
    return cleaned.slice(mount.length + 1);
  }
  const cleaned = posix.normalize(input === "" ? "." : input).replace(/\/+$/, "");
  if (cleaned === "." || cleaned === "") return "";
  if (cleaned === ".." || cleaned.startsWith("../")) {
    throw PlatformError.invalidArgument(`path ${quotePath(input)} escapes the workspace`, ComputeReason.pathEscapes);
  }
  return cleaned;
}

// The sandbox's system root lives there; a workspace over it would shadow it.
const RESERVED_TOP_DIRS = new Set([
  "bin",
  "sbin",
  "lib",
  "lib32",
  "lib64",
  "libx32",
  "usr",
  "etc",
  "proc",
  "dev",
  "sys",
  "tmp",
]);

/** Cleans a mount path given in a WorkspaceSpec: absolute, no `..`. */
export function cleanMountPath(input: string): string {
  if (!input.startsWith("/") || input.includes("\0")) {
    throw PlatformError.invalidArgument("workspace.mount_path must be an absolute path", ComputeReason.invalidArgument);
  }
  checkPathLimits(input, "workspace.mount_path");
  const cleaned = posix.normalize(input).replace(/\/+$/, "") || "/";
  const top = cleaned.split("/")[1] ?? "";
  if (cleaned === "/" || RESERVED_TOP_DIRS.has(top)) {
    throw PlatformError.invalidArgument(
      `workspace.mount_path cannot be ${quotePath(cleaned)}`,
      ComputeReason.invalidArgument,
    );
  }
  return cleaned;
}
