import { ConnectError } from "@connectrpc/connect";
import type { ServerMetrics } from "./server-metrics.ts";

// gRPC's canonical names (OK, NOT_FOUND, ...), what grpc-prometheus and most dashboards label with.
const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

/** The canonical name of the gRPC status `e` leaves with. */
export function codeNameOf(e: unknown): string {
  return CODE_NAMES[ConnectError.from(e).code] ?? "UNKNOWN";
}

/** Counts and times one ended RPC by service, method and status (`started`: performance.now() at its start). */
export function observeRpc(
  metrics: ServerMetrics,
  server: string,
  service: string,
  method: string,
  started: number,
  code: string,
): void {
  metrics.observeRpc(server, service, method, code, (performance.now() - started) / 1000);
}
