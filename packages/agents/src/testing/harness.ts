import { createClient, createRouterTransport } from "@connectrpc/connect";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { createTestDatabase } from "@platform/db/testing";
import { AgentService, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { errorInterceptor } from "@platform/rpc";
import pino from "pino";
import { ComputeSandboxes } from "../adapters/compute.ts";
import { IdentityAuthenticator } from "../adapters/identity.ts";
import { type AgentsAppOptions, createAgentsApp } from "../app.ts";
import type { AgentsDB } from "../db/schema.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "./compute-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { ScriptedModel } from "./scripted-model.ts";

export type Harness = Awaited<ReturnType<typeof startHarness>>;

/**
 * The agents app over a fresh test database, with identity and compute
 * doubles served over real gRPC, mounted on an in-process Connect router.
 * Models: `dev/...` and `scripted/...` (the returned ScriptedModel).
 */
export async function startHarness(
  options: Partial<Omit<AgentsAppOptions, "database" | "authenticator" | "sandboxes" | "logger">> = {},
) {
  const database = await createTestDatabase<AgentsDB>();
  const identity = new IdentityDouble();
  const compute = new ComputeDouble();
  const identityUrl = await identity.start();
  const computeUrl = await compute.start();
  const scripted = new ScriptedModel();
  const providers =
    options.providers ?? new ProviderRegistry().register("dev", new DevModel()).register("scripted", scripted);
  const logger = pino({ level: process.env.LOG_LEVEL ?? "silent" });
  /** One instance of the app over the shared database and doubles, with in-process clients. */
  const instance = async () => {
    const app = await createAgentsApp({
      pollMs: 200,
      ...options,
      providers,
      database,
      logger,
      authenticator: new IdentityAuthenticator(grpcTransport(identityUrl)),
      sandboxes: new ComputeSandboxes(grpcTransport(computeUrl)),
    });
    const transport = createRouterTransport(
      (router) => {
        for (const s of app.services) router.service(s.service as never, s.impl as never);
      },
      { router: { interceptors: [errorInterceptor(logger), ...app.interceptors] } },
    );
    return { app, agents: createClient(AgentService, transport), sessions: createClient(SessionService, transport) };
  };
  const { app, agents, sessions } = await instance();
  /** A second instance of the app over the same database and doubles (a replica; cheap, no new database). */
  const replica = instance;
  return {
    replica,
    app,
    database,
    identity,
    compute,
    scripted,
    agents,
    sessions,
    identityUrl,
    computeUrl,
    /** Call options carrying a caller's bearer token. */
    as: (caller: { token: string }) => ({ headers: { authorization: `Bearer ${caller.token}` } }),
    async close() {
      await app.stop();
      await identity.stop();
      await compute.stop();
      await database.close();
    },
  };
}

/** Collects a server stream. */
export async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of stream) out.push(item);
  return out;
}
