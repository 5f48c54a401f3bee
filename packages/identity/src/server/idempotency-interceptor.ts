import { createHash } from "node:crypto";
import { type DescMessage, type DescService, fromBinary, toBinary } from "@bufbuild/protobuf";
import { type HandlerContext, type Interceptor, createContextKey } from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import { IdempotencyStore } from "../idempotency/idempotency-store.ts";
import { authContextKey } from "./auth-interceptor.ts";
import { ruleOf } from "./policies.ts";

export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const REPLAYED_HEADER = "idempotent-replayed";

/** The stored response to replay instead of running the handler (see `replayable`). */
const replayKey = createContextKey<Uint8Array | undefined>(undefined, { description: "idempotent replay" });

function fingerprint(method: string, schema: DescMessage, message: unknown): string {
  return createHash("sha256")
    .update(method)
    .update("\0")
    .update(toBinary(schema, message as never))
    .digest("hex");
}

/**
 * Idempotency-Key on every mutating RPC but login, refresh and logout
 * (policies.ts marks them). Runs after the auth interceptor: keys are scoped
 * to the caller (user and org), so two callers may use the same key. The
 * request fingerprint is the method plus the request message in protobuf
 * binary, so a REST and a gRPC call of the same request match. A successful
 * response is stored (sealed under the KEK) and replayed for 24 h with
 * `Idempotent-Replayed: true`; a failed one releases the key so the client
 * can retry.
 */
export function idempotencyInterceptor(store: IdempotencyStore): Interceptor {
  const idempotent = async (
    next: Parameters<Interceptor>[0],
    req: Parameters<ReturnType<Interceptor>>[0] & { stream: false },
  ) => {
    const caller = req.contextValues.get(authContextKey);
    if (!caller) throw PlatformError.internal("idempotent RPC without a caller");
    const key = IdempotencyStore.validateKey(req.header.get(IDEMPOTENCY_KEY_HEADER));
    const scope = `${caller.userId}/${caller.orgId}`;
    const method = `${req.method.parent.typeName}/${req.method.name}`;
    const claim = await store.claim(scope, key, method, fingerprint(method, req.method.input, req.message));
    if (claim.kind === "replay") {
      // Answered by `replayable` in place of the handler, so the protocol's
      // own response headers stay intact.
      req.contextValues.set(replayKey, claim.response);
      return next(req);
    }
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (err) {
      await store.release(scope, key).catch(() => {});
      throw err;
    }
    if (res.stream) return res;
    await store.complete(scope, key, method, toBinary(req.method.output, res.message as never));
    return res;
  };
  // Only the marked mutations pay for an async frame here.
  return (next) => (req) => (ruleOf(req.method)?.idempotent && !req.stream ? idempotent(next, req) : next(req));
}

type AnyImpl = Record<string, ((req: never, ctx: HandlerContext) => unknown) | undefined>;

/**
 * Wraps a service implementation so that a request the idempotency
 * interceptor marked as a replay gets the stored response, with
 * `Idempotent-Replayed: true`, and the handler does not run.
 */
export function replayable<T extends object>(service: DescService, impl: T): T {
  const wrapped: AnyImpl = { ...(impl as AnyImpl) };
  for (const method of service.methods) {
    const fn = (impl as AnyImpl)[method.localName];
    if (!fn || method.methodKind !== "unary") continue;
    wrapped[method.localName] = (req: never, ctx: HandlerContext) => {
      const stored = ctx.values.get(replayKey);
      if (!stored) return fn(req, ctx);
      ctx.responseHeader.set(REPLAYED_HEADER, "true");
      return fromBinary(method.output, stored);
    };
  }
  return wrapped as T;
}
