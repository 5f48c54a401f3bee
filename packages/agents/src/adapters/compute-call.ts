import { Code, PlatformError } from "@platform/errors";
import { fromConnectError, isPlatformStatus } from "@platform/rpc";

/**
 * One call to compute, its failure as a platform error: compute's own
 * answers with a code in `relayed` pass through as they are (what a caller
 * should see: its path rules, a missing file, a full disk); anything else is
 * `unavailable`, naming the RPC (the tool loop turns that into an error result
 * the model can read).
 */
export async function computeCall<T>(
  rpc: string,
  fn: () => Promise<T>,
  relayed: ReadonlySet<Code> = new Set(),
): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof PlatformError) throw err;
    if (relayed.size > 0 && isPlatformStatus(err)) {
      const status = fromConnectError(err);
      if (relayed.has(status.code)) throw status;
    }
    const message = err instanceof Error ? err.message : String(err);
    throw new PlatformError(Code.Unavailable, "unavailable", `compute ${rpc} failed: ${message}`, {}, { cause: err });
  }
}
