import { randomBytes, randomUUID } from "node:crypto";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code as ConnectCode, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { parseAuthorization } from "@platform/credentials";
import { Code, IdentityRestCode, isUuid, PlatformError } from "@platform/errors";
import {
  type InvokeEvent,
  type InvokeEventSchema,
  type InvokeRequest,
  InvokeRequestSchema,
} from "@platform/gen/runtime/v1/runtime_pb";
import { fromConnectError, isPlatformStatus, openStream, requestInfo, toConnectError } from "@platform/rpc";
import type { Logger } from "pino";
import { isCallerFault } from "../caller-fault.ts";
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

/** The API key scope invoking needs (identity's api-keys/scopes.ts). */
const SESSIONS_RUN = "sessions:run";

/**
 * The router's RuntimeService.Invoke (served as SSE on
 * POST /v1/sessions/{session_id}/invoke): bearer JWT or API key verified by
 * identity (a key needs `sessions:run`),
 * tenant = org, the tenant's worker found or woken, the call forwarded with
 * tenant metadata. A worker that cannot be reached even after the cold-start
 * wait and one retry is 503 + Retry-After: 5. A refusal of the request itself
 * (a session that does not exist: 404) is its HTTP status, before any stream;
 * once the worker accepted the call the 200 and SSE headers go out at once,
 * and every later failure is an `error` event.
 */
export function routerInvoke(deps: RouterInvokeDeps) {
  return async function* invoke(req: InvokeRequest, ctx: HandlerContext): AsyncIterable<InvokeEventInit> {
    const { token, kind } = bearerCredential(ctx.requestHeader.get(Metadata.authorization));
    const principal =
      kind === "jwt" ? await deps.auth.verifyJwt(token, ctx.signal) : await deps.auth.verifyApiKey(token, ctx.signal);
    // An API key runs sessions only with `sessions:run`; the agents service
    // checks it again on the forwarded call, but a refused key must not wake
    // a worker first. A JWT (a person) has no scopes.
    if (principal.scopes && !principal.scopes.includes(SESSIONS_RUN)) {
      throw PlatformError.permissionDenied(
        `the API key lacks the ${SESSIONS_RUN} scope`,
        IdentityRestCode.insufficientScope,
      );
    }
    if (!isUuid(req.sessionId)) throw PlatformError.invalidArgument("session_id must be a UUID");
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
    // The caller's own fault (no such session, a malformed message, a busy
    // session) is its HTTP status, as on the agents service; a failure of
    // the worker or of the agents service is the stream's error event.
    if (opened.kind === "failed" && isCallerFault(opened.error)) throw fromConnectError(opened.error);
    // Accepted: the 200 and SSE headers go out now, not with the first text
    // (which may follow a long tool call).
    openStream(ctx);
    try {
      if (opened.kind === "failed") {
        yield errorEvent(opened.error);
        return;
      }
      let r: IteratorResult<InvokeEvent>;
      try {
        r = await opened.first;
      } catch (err) {
        if (ctx.signal.aborted) throw err;
        log?.warn({ err: String(err) }, "tenant stream failed before its first event");
        yield errorEvent(err);
        return;
      }
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
  | { kind: "ok"; target: Target; it: AsyncIterator<InvokeEvent>; first: Promise<IteratorResult<InvokeEvent>> }
  | { kind: "failed"; target: Target; it?: undefined; error: unknown }
  | { kind: "unreachable"; target: Target; error: unknown };

/**
 * Starts the call and waits until the worker accepts it (its response
 * headers, sent once the agents service accepted the call) or answers its
 * first event: only then is it known whether the worker was there at all.
 * Connection-level failures are "unreachable" (retried once after a wake);
 * an error status from the worker itself is "failed".
 */
async function open(
  workers: TenantWorkers,
  target: Target,
  req: InvokeRequest,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<Opened> {
  let accepted!: () => void;
  const opened = new Promise<void>((resolve) => {
    accepted = resolve;
  });
  const it = workers.invoke(target.url, req, headers, signal, () => accepted())[Symbol.asyncIterator]();
  const first = it.next();
  try {
    await Promise.race([first, opened]);
    return { kind: "ok", target, it, first };
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

/** Exactly `Bearer <JWT>` or `Bearer <API key>` (@platform/credentials): a loose variant is 401. */
function bearerCredential(header: string | null) {
  const parsed = parseAuthorization(header);
  if (!parsed.ok) throw PlatformError.unauthenticated("a bearer JWT or API key is required");
  return parsed.credential;
}

/** An unavailable error leaves with `Retry-After: 5` (HTTP header / gRPC metadata). */
function withRetryAfter(err: unknown, log?: Logger): unknown {
  if (!(err instanceof PlatformError) || err.code !== Code.Unavailable) return err;
  log?.warn({ err: err.message, cause: String(err.cause ?? "") }, "tenant unavailable");
  const ce = toConnectError(err);
  ce.metadata.set("retry-after", RETRY_AFTER_SECONDS);
  return ce;
}
