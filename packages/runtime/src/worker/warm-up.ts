import { createClient } from "@connectrpc/connect";
import { Health } from "@platform/gen/grpc/health/v1/health_pb";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { createServiceTransport, type ServiceTls } from "@platform/rpc";
import { RUNTIME_SERVICE_NAME } from "../health/grpc-health.ts";
import { identityHeaders } from "../metadata.ts";
import { ConnectAgentsClient } from "./agents-client.ts";
import type { AgentsPort } from "./agents-port.ts";
import { agentsTransport, startWorker } from "./worker.ts";

const NOBODY = "00000000-0000-4000-8000-000000000000";

/** Answers every turn with one text and done, in process: the warm-up calls no service. */
const echoAgents: AgentsPort = {
  async *sendMessages() {
    yield { type: "text", content: "warm" };
    yield { type: "done", content: "" };
  },
  async *rejoin() {},
};

/**
 * Serves a health check and one Invoke to itself on a throwaway port, so V8
 * has compiled the server's request path (HTTP/2, Connect, protobuf, the
 * invoke handler) before a tenant's first request needs it: in a fresh
 * process that first request costs several times a warm one. A spare does
 * this while it waits, on the address the worker will listen on (the
 * platform's configured host: nothing listens beyond it, even for a moment);
 * failures only mean a colder first request. With
 * `tls` the call goes over mutual TLS with the worker's own certificate (the
 * handshake is on the path too), which this throwaway server alone admits.
 * Resolves whether the call went through.
 */
export async function warmUp(tls: ServiceTls | undefined, host = "127.0.0.1"): Promise<boolean> {
  const server = await startWorker(
    { tenantId: NOBODY, orgId: NOBODY, agentsUrl: "http://127.0.0.1:9", port: 0, host, tls },
    { agents: echoAgents, shutdownTimeoutMs: 0, callers: tls ? [tls.name] : undefined },
  );
  try {
    // The server's close ends this connection too.
    const transport = createServiceTransport({ baseUrl: server.url, tls });
    await createClient(Health, transport).check({ service: RUNTIME_SERVICE_NAME });
    const headers = identityHeaders({
      authorization: "Bearer warm-up",
      tenantId: NOBODY,
      orgId: NOBODY,
      userId: NOBODY,
      requestId: "warm-up",
      traceId: "warm-up",
    });
    const events = createClient(RuntimeService, transport).invoke(
      { sessionId: NOBODY, messages: [{ role: "user", content: "warm" }] },
      { headers },
    );
    for await (const _ of events);
    return true;
  } catch {
    // A colder first request, nothing worse.
    return false;
  } finally {
    await server.close();
  }
}

/** An agents client whose HTTP/2 connection is already open. */
export interface ConnectedAgents {
  url: string;
  agents: AgentsPort;
}

/**
 * Opens the agents connection ahead of the first request (one health check
 * over the client's own transport; any answer will do). A spare can: the
 * agents URL and the worker certificate are the same for every tenant.
 */
export async function connectAgents(url: string, tls: ServiceTls | undefined): Promise<ConnectedAgents> {
  const transport = agentsTransport(url, tls);
  await createClient(Health, transport)
    .check({}, { timeoutMs: 1000 })
    .catch(() => {});
  return { url, agents: new ConnectAgentsClient(transport) };
}
