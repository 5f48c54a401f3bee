import { ComputeReason, PlatformError } from "@platform/errors";
import { LIMITS } from "./limits.ts";

/** A Kubernetes capacity quantity as PVCs take it: digits, optional fraction, optional suffix. */
const QUANTITY = /^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/;
const MULTIPLIER: Record<string, number> = {
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** Bytes of a capacity string ("5Gi", "64Mi", "1.5G", "1000000"), rounded up; undefined when malformed. */
export function parseCapacity(text: string): number | undefined {
  const m = text.length <= 32 ? QUANTITY.exec(text) : null;
  if (!m) return undefined;
  return Math.ceil(Number(m[1]) * (MULTIPLIER[m[2] ?? ""] as number));
}

/**
 * The workspace size in bytes, validated the same way for every driver (the
 * local driver's ext4 image and the Kubernetes PVC request): a capacity
 * string within [LIMITS.minWorkspaceBytes, LIMITS.maxWorkspaceBytes].
 * INVALID_ARGUMENT naming `field` otherwise.
 */
export function workspaceSizeBytes(text: string, field = "workspace.size"): number {
  const bytes = parseCapacity(text);
  if (bytes === undefined || bytes < LIMITS.minWorkspaceBytes || bytes > LIMITS.maxWorkspaceBytes) {
    throw PlatformError.invalidArgument(
      `${field} must be a capacity such as 5Gi or 64Mi, between 32Mi and 1Ti, got ${JSON.stringify(text.slice(0, 40))}`,
      ComputeReason.invalidArgument,
      { field },
    );
  }
  return bytes;
}
