// An open-loop load generator in a process of its own (load-process.ts
// forks it): the bench's own process holds the whole harness (~55 MB of live
// heap), so each of its mark-compacts paused the client 5-38 ms mid-window,
// and a client pause reads as a server stall. Here the heap is the client's.
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { GrpcLoadClient } from "../grpc-load-client.ts";
import { openLoop } from "./open-loop.ts";

type LoadRequest =
  | { id: number; type: "connect"; name: string; url: string; tls?: { ca: Buffer; cert: Buffer; key: Buffer } }
  | { id: number; type: "verifyAPIKey"; name: string; apiKey: string; times: number }
  | { id: number; type: "openLoop"; name: string; apiKey: string; rate: number; seconds: number }
  | { id: number; type: "close" };

const clients = new Map<string, GrpcLoadClient>();

function client(name: string): GrpcLoadClient {
  const c = clients.get(name);
  if (!c) throw new Error(`no connection named ${name}`);
  return c;
}

const verify = (name: string, apiKey: string) => client(name).unary(AuthService.method.verifyAPIKey, { apiKey });

async function handle(msg: LoadRequest): Promise<unknown> {
  switch (msg.type) {
    case "connect":
      clients.set(msg.name, new GrpcLoadClient(msg.url, msg.tls && { ...msg.tls }));
      return undefined;
    case "verifyAPIKey":
      // One after another: a warm-up of the connection and both ends' code.
      for (let i = 0; i < msg.times; i++) await verify(msg.name, msg.apiKey);
      return undefined;
    case "openLoop":
      return openLoop(() => verify(msg.name, msg.apiKey), msg.rate, msg.seconds);
    case "close":
      await Promise.all([...clients.values()].map((c) => c.close()));
      clients.clear();
      return undefined;
  }
}

process.on("message", (raw) => {
  const msg = raw as LoadRequest;
  handle(msg).then(
    (result) => process.send?.({ id: msg.id, result }),
    (err: unknown) => process.send?.({ id: msg.id, error: String(err) }),
  );
});
process.on("disconnect", () => process.exit(0));
