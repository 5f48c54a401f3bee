import { PlatformError } from "@platform/errors";

/** The value of `image` (and SANDBOX_IMAGE) that means the host's own read-only /usr, not a stored image. */
export const HOST_IMAGE = "host";

const NAME = /^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/** A stored image's address: `name:tag` (Docker's rules; no registry host with a port, no digest). */
export interface ImageRef {
  name: string;
  tag: string;
}

/** Parses `name[:tag]` (tag `latest` when left out); INVALID_ARGUMENT naming the rule broken. */
export function parseImageRef(text: string, field = "name"): ImageRef {
  const colon = text.lastIndexOf(":");
  const hasTag = colon > text.lastIndexOf("/");
  const name = hasTag ? text.slice(0, colon) : text;
  const tag = hasTag ? text.slice(colon + 1) : "latest";
  if (name.length === 0 || name.length > 255 || !NAME.test(name))
    throw PlatformError.invalidArgument(
      `${field}: image name ${JSON.stringify(text.slice(0, 128))} must be lower-case letters, digits and . _ - / (as Docker's)`,
    );
  if (!TAG.test(tag))
    throw PlatformError.invalidArgument(`${field}: image tag ${JSON.stringify(tag.slice(0, 128))} is not a valid tag`);
  if (name === HOST_IMAGE)
    throw PlatformError.invalidArgument(`${field}: "${HOST_IMAGE}" is reserved for the host mode`);
  return { name, tag };
}

export function formatImageRef(ref: ImageRef): string {
  return `${ref.name}:${ref.tag}`;
}
