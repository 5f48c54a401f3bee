import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import {
  create,
  type DescMessage,
  type DescMethod,
  type DescService,
  fromBinary,
  isMessage,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import { Code, ConnectError, createHandlerContext } from "@connectrpc/connect";
import * as grpc from "@grpc/grpc-js";
import { type CallerPolicy, callerAllowed, type ServiceTls, toConnectError } from "@platform/rpc";

// Resolved from this file (import.meta.url is its source's path in the bench's bundle too; import.meta.resolve
// would resolve from the bundle's directory, where no node_modules are).
const VERSION = (
  JSON.parse(readFileSync(createRequire(import.meta.url).resolve("@grpc/grpc-js/package.json"), "utf8")) as {
    version: string;
  }
).version;

/** "grpc-js 1.14.7": the peer's name in the report, with the pinned version. */
export const GRPC_JS = `grpc-js ${VERSION}`;

type SurfaceCall = grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown>;

// A Connect implementation's methods, looked up by local name (ServiceImpl<typeof S>, partial).
type AnyImpl = Record<string, ((req: unknown, ctx: never) => unknown) | undefined>;

/**
 * A service's own Connect implementation (the ServiceImpl its server
 * registers with @platform/rpc) hosted by a @grpc/grpc-js Server instead:
 * the peer of "our server" in the bench. The glue is what grpc-js needs and
 * nothing more: protobuf-es (de)serializers per method, a Connect
 * HandlerContext per call (its signal aborted when the call is cancelled),
 * unary and server-streaming methods (written with backpressure: wait for
 * drain only when write says so), errors as gRPC statuses. On mutual TLS,
 * like our internal listeners, it refuses a caller the policy does not list
 * (the service name is the client certificate's CN), as our server's caller
 * interceptor does; our other interceptors (request ids, logging, metrics,
 * input guards) have no counterpart here, so the peer does less per call.
 */
export async function serveOnGrpcJs(
  service: DescService,
  impl: object,
  options: { host: string; tls?: ServiceTls; callers?: CallerPolicy },
): Promise<{ url: string; close(): Promise<void> }> {
  const methods = impl as AnyImpl;
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  const implementation: grpc.UntypedServiceImplementation = {};
  const callers = new Map<string, string>();
  for (const method of service.methods) {
    const fn = methods[method.localName];
    if (!fn || (method.methodKind !== "unary" && method.methodKind !== "server_streaming")) continue;
    const path = `/${service.typeName}/${method.name}`;
    definition[method.localName] = {
      path,
      requestStream: false,
      responseStream: method.methodKind === "server_streaming",
      requestSerialize: (m: unknown) => bufferOf(toBinary(method.input, m as MessageShape<DescMessage>)),
      requestDeserialize: (b: Buffer) => fromBinary(method.input, b),
      responseSerialize: (m: unknown) => bufferOf(toBinary(method.output, messageOf(method.output, m as object))),
      responseDeserialize: (b: Buffer) => fromBinary(method.output, b),
    };
    const authorize = (call: SurfaceCall) => {
      if (!options.tls || !options.callers) return;
      // grpc-js hands out the peer certificate per call (getPeerCertificate each time, ~4 % of the peer's
      // CPU in a profile); ours reads it once per connection. Remembered per connection here too, keyed by
      // the client's address and port (a bench shortcut: unique while the connection lives).
      const peer = call.getPeer();
      let caller = callers.get(peer);
      if (caller === undefined) {
        const cn = call.getAuthContext().sslPeerCertificate?.subject?.CN;
        caller = typeof cn === "string" ? cn : "";
        callers.set(peer, caller);
      }
      if (!caller || !callerAllowed(options.callers, service.typeName, method.name, caller))
        throw new ConnectError(
          `${caller || "a caller without a certificate"} may not call ${path}`,
          Code.PermissionDenied,
        );
    };
    const contextOf = (call: SurfaceCall) => {
      const ctx = createHandlerContext({
        service,
        method: method as DescMethod,
        protocolName: "grpc",
        requestMethod: "POST",
        url: path,
      });
      call.on("cancelled", () => ctx.abort(new ConnectError("cancelled by the client", Code.Canceled)));
      return ctx;
    };
    if (method.methodKind === "unary") {
      implementation[method.localName] = (
        call: grpc.ServerUnaryCall<unknown, unknown>,
        done: grpc.sendUnaryData<unknown>,
      ) => {
        void (async () => {
          authorize(call);
          return await fn(call.request, contextOf(call) as never);
        })().then(
          (res) => done(null, res),
          (err) => done(statusOf(err)),
        );
      };
    } else {
      implementation[method.localName] = (call: grpc.ServerWritableStream<unknown, unknown>) => {
        void (async () => {
          authorize(call);
          for await (const m of fn(call.request, contextOf(call) as never) as AsyncIterable<unknown>) {
            if (call.cancelled) break;
            if (!call.write(m)) await once(call, "drain");
          }
          call.end();
        })().catch((err) => call.emit("error", statusOf(err)));
      };
    }
  }
  const server = new grpc.Server();
  server.addService(definition, implementation);
  const credentials = options.tls
    ? grpc.ServerCredentials.createSsl(
        options.tls.ca,
        [{ private_key: options.tls.key, cert_chain: options.tls.cert }],
        true,
      )
    : grpc.ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${options.host}:0`, credentials, (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    url: `${options.tls ? "https" : "http"}://${options.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 5000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

function bufferOf(u: Uint8Array): Buffer {
  return Buffer.from(u.buffer, u.byteOffset, u.byteLength);
}

function messageOf(schema: DescMessage, m: object): MessageShape<DescMessage> {
  return isMessage(m, schema) ? m : create(schema, m as never);
}

/** A thrown error as the status grpc-js sends (Connect's codes are gRPC's numbers); PlatformErrors as our server maps them. */
function statusOf(err: unknown): Partial<grpc.StatusObject> {
  const ce = err instanceof ConnectError ? err : toConnectError(err);
  return { code: ce.code as number as grpc.status, details: ce.rawMessage };
}
