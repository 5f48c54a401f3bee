import { Code, PlatformError } from "@platform/errors";
import { type E2bSandbox, type SandboxRecords, tokenMatches } from "./records.ts";

/**
 * Who may use a sandbox's envd surface: the SDK names the sandbox in
 * `E2b-Sandbox-Id` and proves it with `X-Access-Token`, the token create and
 * connect returned to a caller whose API key identity verified. A sandbox
 * this listener does not know (killed, timed out, never made here) is "not
 * running", which the SDK reports as the sandbox being gone.
 */
export function envdSandbox(records: SandboxRecords, headers: Headers): E2bSandbox {
  const id = headers.get("e2b-sandbox-id") ?? "";
  const record = records.get(id);
  if (!record) {
    throw new PlatformError(
      Code.Unavailable,
      "sandbox_not_running",
      `sandbox ${JSON.stringify(id.slice(0, 64))} is not running: it was killed, reached its timeout, or was never made here`,
    );
  }
  if (!tokenMatches(record, headers.get("x-access-token") ?? undefined)) {
    throw new PlatformError(
      Code.Unauthenticated,
      "unauthenticated",
      "missing or wrong X-Access-Token for this sandbox",
    );
  }
  return record;
}
