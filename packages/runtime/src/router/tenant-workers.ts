import { createServiceTransport, type ServiceTls, streamCall } from "@platform/rpc";
import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { type InvokeEvent, type InvokeRequest, RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";

/** Calls RuntimeService.Invoke on a tenant worker. */
export interface TenantWorkers {
  /** `onOpen` runs when the worker's response headers arrive: it accepted the call (its first event may come much later). */
  invoke(
    url: string,
    req: InvokeRequest,
    headers: Record<string, string>,
    signal: AbortSignal,
    onOpen?: () => void,
  ): AsyncIterable<InvokeEvent>;
}

/**
 * gRPC clients to tenant workers, one (HTTP/2 session) per worker URL; with
 * `tls` (the router's certificate) over mutual TLS, accepting only a server
 * whose certificate names runtime-worker.
 */
export class GrpcTenantWorkers implements TenantWorkers {
  readonly #clients = new Map<string, { transport: Transport; client: Client<typeof RuntimeService> }>();

  constructor(private readonly tls?: ServiceTls) {}

  invoke(
    url: string,
    req: InvokeRequest,
    headers: Record<string, string>,
    signal: AbortSignal,
    onOpen?: () => void,
  ): AsyncIterable<InvokeEvent> {
    return streamCall(this.#for(url).transport, RuntimeService.method.invoke, req, {
      headers,
      signal,
      onHeader: onOpen && (() => onOpen()),
    });
  }

  /**
   * The transport of the worker's session, for the cold-start health wait:
   * the forward that follows then finds the connection open.
   */
  transport(url: string): Transport {
    return this.#for(url).transport;
  }

  #for(url: string) {
    let c = this.#clients.get(url);
    if (!c) {
      // Invoke's events are read without Connect's client pipeline (rpc direct-stream.ts).
      const transport = createServiceTransport({
        baseUrl: url,
        tls: this.tls,
        expectServer: "runtime-worker",
        direct: [RuntimeService.method.invoke],
      });
      c = { transport, client: createClient(RuntimeService, transport) };
      this.#clients.set(url, c);
    }
    return c;
  }
}
