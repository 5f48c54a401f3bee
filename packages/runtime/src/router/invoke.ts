import { randomBytes, randomUUID } from "node:crypto";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code as ConnectCode, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { parseAuthorization } from "@platform/credentials";
import { Code, PlatformError } from "@platform/errors";
import {
  type InvokeEvent,
  type InvokeEventSchema,
  type InvokeRequest,
  InvokeRequestSchema,
} from "@platform/gen/runtime/v1/runtime_pb";
import { isPlatformStatus, requestInfo, toConnectError } from "@platform/rpc";
import type { Logger } from "pino";
import { type CallIdentity, identityHeaders, Metadata } from "../metadata.ts";
import type { Authenticator } from "./authenticator.ts";
import type { TenantWorkers } from "./tenant-workers.ts";
import { type Target, type TenantWaker, TenantUnavailableError } from "./waker.ts";

type InvokeEventInit = MessageInitShape<typeof InvokeEventSchema>;

export interface RouterInvokeDeps {
  auth: Authenticator;
  waker: TenantWaker;
  workers: TenantWorkers;
  controller: { updateLastSeen(deployName: string): Promise<void> };
  logger?: Logger;
}

/** Spec: 503 carries `Retry-After: 5`. */
export const RETRY_AFTER_SECONDS = "5";

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/**
 * The router's RuntimeService.Invoke (served as SSE on
 * POST /v1/sessions/{session_id}/invoke): bearer JWT verified by identity,
 * tenant = org, the tenant's worker found or woken, the call forwarded with
 * tenant metadata. A worker that cannot be reached even after the cold-start
 * wait and one retry is 503 + Retry-After: 5. Once the worker has answered,
 * every failure is an `error` event.
 */
export function routerInvoke(deps: RouterInvokeDeps) {
  return async function* invoke(req: InvokeRequest, ctx: HandlerContext): AsyncIterable<InvokeEventInit> {
    const token = bearerToken(ctx.requestHeader.get(Metadata.authorization));
    const principal = await deps.auth.verifyJwt(token, ctx.signal);
    if (!UUID.test(req.sessionId)) throw PlatformError.invalidArgument("session_id must be a UUID");
    const info = requestInfo(ctx);
    const call: CallIdentity = {
      authorization: `Bearer ${token}`,
      tenantId: principal.orgId,
      orgId: principal.orgId,
      userId: principal.userId,
      requestId: info?.requestId || ctx.requestHeader.get(Metadata.requestId) || randomUUID(),
      traceId: info?.traceId || ctx.requestHeader.get(Metadata.traceId) || randomBytes(16).toString("hex"),
    };
    const log = (info?.logger ?? deps.logger)?.child({ tenantId: call.tenantId, sessionId: req.sessionId });
    const forward = create(InvokeRequestSchema, {
      sessionId: req.sessionId,
      requestId: call.requestId,
      traceId: call.traceId,
      messages: req.messages,
    });
    const headers = identityHeaders(call);

    let opened: Opened;
    try {
      let target = await deps.waker.target(call.tenantId, call.orgId);
      opened = await open(deps.workers, target, forward, headers, ctx.signal);
      if (opened.kind === "unreachable") {
        log?.info({ deployName: target.deployName, err: String(opened.error) }, "tenant worker unreachable; waking");
        target = await deps.waker.wake(call.tenantId, call.orgId);
        opened = await open(deps.workers, target, forward, headers, ctx.signal);
        if (opened.kind === "unreachable") {
          throw new TenantUnavailableError("tenant worker unavailable after the cold-start retry", opened.error);
        }
      }
    } catch (err) {
      throw withRetryAfter(err, log);
    }

    // The worker answered: the forward counts as routed traffic. Stamping
    // now rather than at the end keeps IdleSweep from scaling the worker
    // down under a long stream, and does not depend on the consumer pulling
    // this generator past its terminal event.
    deps.waker.good(call.tenantId, opened.target);
    deps.controller
      .updateLastSeen(opened.target.deployName)
      .catch((err) => log?.warn({ err: String(err), deployName: opened.target.deployName }, "update last-seen failed"));
    try {
      if (opened.kind === "failed") {
        yield errorEvent(opened.error);
        return;
      }
      let r = opened.first;
      while (!r.done) {
        yield r.value;
        if (r.value.event.case === "turnDone" || r.value.event.case === "error") return;
        try {
          r = await opened.it.next();
        } catch (err) {
          if (ctx.signal.aborted) throw err;
          log?.warn({ err: String(err) }, "tenant stream failed mid-way");
          yield errorEvent(err);
          return;
        }
      }
    } finally {
      void opened.it?.return?.();
    }
  };
}

type Opened =
  | { kind: "ok"; target: Target; it: AsyncIterator<InvokeEvent>; first: IteratorResult<InvokeEvent> }
  | { kind: "failed"; target: Target; it?: undefined; error: unknown }
  | { kind: "unreachable"; target: Target; error: unknown };

/**
 * Starts the call and waits for its first event: only then is it known
 * whether the worker was there at all. Connection-level failures are
 * "unreachable" (retried once after a wake); an error status from the worker
 * itself is "failed".
 */
async function open(
  workers: TenantWorkers,
  target: Target,
  req: InvokeRequest,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<Opened> {
  const it = workers.invoke(target.url, req, headers, signal)[Symbol.asyncIterator]();
  try {
    return { kind: "ok", target, it, first: await it.next() };
  } catch (err) {
    if (signal.aborted) throw err;
    const ce = ConnectError.from(err);
    if (ce.code === ConnectCode.Unavailable || ce.code === ConnectCode.DeadlineExceeded) {
      return { kind: "unreachable", target, error: err };
    }
    return { kind: "failed", target, error: err };
  }
}

function errorEvent(err: unknown): InvokeEventInit {
  const ce = ConnectError.from(err);
  // Only a message the worker wrote is shown; a client-side failure's text is not.
  const own = isPlatformStatus(err) ? ce.rawMessage : "";
  const message = ce.code === ConnectCode.Unavailable ? "tenant worker unavailable" : own || "tenant worker failed";
  return { event: { case: "error", value: { message } } };
}

/** Exactly `Bearer <JWT>` (@platform/credentials): an API key or a loose variant is 401. */
function bearerToken(header: string | null): string {
  const parsed = parseAuthorization(header);
  if (!parsed.ok || parsed.credential.kind !== "jwt") throw PlatformError.unauthenticated("a bearer JWT is required");
  return parsed.credential.token;
}

/** An unavailable error leaves with `Retry-After: 5` (HTTP header / gRPC metadata). */
function withRetryAfter(err: unknown, log?: Logger): unknown {
  if (!(err instanceof PlatformError) || err.code !== Code.Unavailable) return err;
  log?.warn({ err: err.message, cause: String(err.cause ?? "") }, "tenant unavailable");
  const ce = toConnectError(err);
  ce.metadata.set("retry-after", RETRY_AFTER_SECONDS);
  return ce;
}
