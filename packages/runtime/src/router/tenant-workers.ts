import { createServiceTransport } from "@platform/rpc";
import { type Client, createClient } from "@connectrpc/connect";
import { type InvokeEvent, type InvokeRequest, RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";

/** Calls RuntimeService.Invoke on a tenant worker. */
export interface TenantWorkers {
  invoke(url: string, req: InvokeRequest, headers: Record<string, string>, signal: AbortSignal): AsyncIterable<InvokeEvent>;
}

/** gRPC clients to tenant workers, one (HTTP/2 session) per worker URL. */
export class GrpcTenantWorkers implements TenantWorkers {
  readonly #clients = new Map<string, Client<typeof RuntimeService>>();

  invoke(url: string, req: InvokeRequest, headers: Record<string, string>, signal: AbortSignal): AsyncIterable<InvokeEvent> {
    let c = this.#clients.get(url);
    if (!c) {
      c = createClient(RuntimeService, createServiceTransport({ baseUrl: url }));
      this.#clients.set(url, c);
    }
    return c.invoke(req, { headers, signal });
  }
}
