import { ComputeReason, PlatformError } from "@platform/errors";

/**
 * Lengths of the CreateSandbox strings that are stored as they come (the
 * sandbox record keeps them for its whole life) and have no other bound:
 * without one a caller could park 1 MiB per sandbox in the database. An image
 * reference is a registry host, a path and a tag or digest (Docker's own
 * parser caps the name at 255); a storage class is a Kubernetes object name
 * (a DNS subdomain, at most 253 characters).
 */
export const MAX_IMAGE_CHARS = 1024;
export const MAX_STORAGE_CLASS_CHARS = 253;

export function checkSandboxStrings(input: { image?: string; workspace?: { storageClass?: string } }): void {
  if ((input.image ?? "").length > MAX_IMAGE_CHARS) {
    throw PlatformError.invalidArgument(
      `image must be at most ${MAX_IMAGE_CHARS} characters`,
      ComputeReason.invalidArgument,
    );
  }
  if ((input.workspace?.storageClass ?? "").length > MAX_STORAGE_CLASS_CHARS) {
    throw PlatformError.invalidArgument(
      `workspace.storage_class must be at most ${MAX_STORAGE_CLASS_CHARS} characters`,
      ComputeReason.invalidArgument,
    );
  }
}
