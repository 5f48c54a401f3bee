import { createServiceTransport, type ServiceTls } from "@platform/rpc";
import { createClient, type Transport } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus } from "@platform/gen/grpc/health/v1/health_pb";

export const RUNTIME_SERVICE_NAME = "runtime.v1.RuntimeService";

/**
 * One gRPC health Check of `service` at `baseUrl`; false on any failure.
 * `transport` (to `baseUrl`) lets the check share a connection with later
 * calls; without one, a new connection is made, with `tls` (the caller's
 * certificate) for an https:// worker.
 */
export async function isServing(
  baseUrl: string,
  service = RUNTIME_SERVICE_NAME,
  timeoutMs = 1000,
  transport?: Transport,
  tls?: ServiceTls,
): Promise<boolean> {
  const client = createClient(Health, transport ?? createServiceTransport({ baseUrl, tls }));
  try {
    const res = await client.check({ service }, { timeoutMs });
    return res.status === HealthCheckResponse_ServingStatus.SERVING;
  } catch {
    return false;
  }
}

/**
 * Polls health until SERVING or until `timeoutMs` passes; resolves whether it
 * became SERVING. `signal` stops early (resolves false). The first probe goes
 * over `transport` when given (a session the caller uses next); later ones
 * each open their own connection (with `tls`, the caller's certificate), so
 * one connect that hangs cannot hold up the wait.
 */
export async function waitServing(
  baseUrl: string,
  timeoutMs: number,
  options: {
    service?: string;
    intervalMs?: number;
    signal?: AbortSignal;
    transport?: Transport;
    tls?: ServiceTls;
  } = {},
): Promise<boolean> {
  if (!Number.isFinite(timeoutMs)) throw new RangeError(`timeoutMs must be a finite number`);
  const deadline = Date.now() + timeoutMs;
  const interval = options.intervalMs ?? 100;
  let transport = options.transport;
  while (!options.signal?.aborted) {
    const left = deadline - Date.now();
    if (left <= 0) return false;
    if (await isServing(baseUrl, options.service, Math.min(1000, left), transport, options.tls)) return true;
    transport = undefined;
    await new Promise((r) => setTimeout(r, Math.min(interval, Math.max(0, deadline - Date.now()))));
  }
  return false;
}
