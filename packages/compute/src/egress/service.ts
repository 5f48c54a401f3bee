import type { Server } from "node:net";
import type { Logger } from "pino";
import type { NetworkEventStore } from "../store/network-event-store.ts";
import type { SandboxStore } from "../store/sandbox-store.ts";
import { verifyProxyCredential } from "./credentials.ts";
import { EgressProxy } from "./proxy.ts";
import type { EgressResolver } from "./resolver.ts";

export interface EgressServiceOptions {
  host: string;
  port: number;
  key: Buffer;
  /** compute's sandbox records: the policy of each connection's sandbox, read per connection. */
  sandboxes: Pick<SandboxStore, "get">;
  events: NetworkEventStore;
  resolver: EgressResolver;
  protectedPorts: number[];
  /** Never reachable whatever a policy says (main.ts: the database's addresses). */
  deniedAddresses?: string[];
  /** Relay tunnels with the splice relay where it can run (COMPUTE_EGRESS_SPLICE_RELAY). */
  spliceRelay?: boolean;
  logger?: Logger;
}

/**
 * The egress proxy as its own service (Kubernetes): one TCP listener, each
 * connection identified by its sandbox credential, the policy read from
 * compute's records at that moment (an update applies to the next
 * connection; a destroyed or unknown sandbox is refused), events and bytes
 * written where compute reads them.
 */
export async function startEgressService(
  o: EgressServiceOptions,
): Promise<{ proxy: EgressProxy; port: number; close(): Promise<void> }> {
  const proxy = new EgressProxy({
    resolver: o.resolver,
    protectedPorts: o.protectedPorts,
    deniedAddresses: o.deniedAddresses ?? [],
    events: o.events,
    ...(o.spliceRelay ? { spliceRelay: true } : {}),
    ...(o.logger ? { logger: o.logger } : {}),
  });
  const server: Server = await proxy.listenShared({
    host: o.host,
    port: o.port,
    identify: async (username, password) => {
      const sandboxId = verifyProxyCredential(o.key, username, password);
      if (!sandboxId) return undefined;
      const record = await o.sandboxes.get(sandboxId);
      if (!record || record.status === "DESTROYED") return undefined;
      return { sandboxId, policy: record.networkPolicy ?? undefined };
    },
  });
  const address = server.address();
  return {
    proxy,
    port: typeof address === "object" && address ? address.port : o.port,
    close: () => proxy.close(),
  };
}
