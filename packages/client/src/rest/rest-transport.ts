import {
  create,
  type DescMessage,
  type DescMethod,
  type DescMethodStreaming,
  type DescMethodUnary,
  fromJson,
  type JsonValue,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import { ConnectError, type StreamResponse, type Transport, type UnaryResponse } from "@connectrpc/connect";
import { Code } from "@platform/errors";
import { httpBindingsOf, sseOf, successStatusOf } from "@platform/rpc/http-rule";
import { ClientReason, clientError, errorFromResponse } from "../errors.ts";
import { buildCall, type HttpCall } from "./request.ts";
import { decodeSseEvent, readSse } from "./sse.ts";

/** Where a call's credential comes from (the client's login state or API key). */
export interface Authorizer {
  /** The `Authorization` value for the next call (refreshing first when it is about to expire), or none. */
  authorization(): Promise<string | undefined>;
  /** After a 401 to a call sent with `used`: true when a fresh credential is ready and the call should be sent again. */
  renew(used: string): Promise<boolean>;
}

export interface RestTransportOptions {
  /** The service's public REST origin, e.g. http://127.0.0.1:8082. */
  baseUrl: string;
  /** Defaults to the global fetch (Node 20+, browsers). */
  fetch?: typeof fetch;
  auth?: Authorizer;
  /** Headers sent on every call. */
  headers?: HeadersInit;
  /** Deadline of a unary call that names none (0: none). Streams have none unless the call names one. */
  unaryTimeoutMs?: number;
}

/** What `new Headers()` takes (the DOM's HeadersInit, which Node's types do not name). */
export type HeadersInit = ConstructorParameters<typeof Headers>[0];

const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * A Connect transport that speaks the platform's public REST: each RPC goes
 * to its `google.api.http` route (the public ports serve REST and SSE only,
 * not the Connect or gRPC protocols), so the generated clients
 * (`createClient(AgentService, transport)`) work from Node and browsers.
 * Unary answers are read as the response message (`response_body`
 * respected); a server-streaming RPC with `(platform.api.v1.sse)` is read as
 * its event stream. An error answer is thrown as the ConnectError a gRPC
 * call would raise (ErrorInfo with the reason); a 401 is retried once after
 * the authorizer renewed the credential; mutating calls carry an
 * Idempotency-Key (one per call, kept across that retry).
 */
export function createRestTransport(options: RestTransportOptions): Transport {
  const doFetch =
    options.fetch ?? ((input: Parameters<typeof fetch>[0], init?: RequestInit) => globalThis.fetch(input, init));

  async function send(
    method: DescMethod,
    input: MessageInitShape<DescMessage>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: HeadersInit | undefined,
    accept: string,
  ): Promise<{ res: Response; call: HttpCall; signal: AbortSignal; done(): void }> {
    const bindings = httpBindingsOf(method);
    if (bindings.length === 0)
      throw new ConnectError(
        `${method.parent.typeName}/${method.name} has no REST route`,
        Code.Unimplemented as number,
      );
    const call = buildCall(options.baseUrl, method, bindings, create(method.input, input));
    const linked = linkSignals(signal, timeoutMs);
    const headers = new Headers(options.headers);
    for (const [k, v] of new Headers(header)) headers.set(k, v);
    headers.set("accept", accept);
    if (call.body !== undefined) headers.set("content-type", "application/json");
    if (MUTATING.has(call.verb) && !headers.has("idempotency-key")) headers.set("idempotency-key", randomId());
    const callerAuth = headers.has("authorization");
    const attempt = async (): Promise<{ res: Response; used: string | undefined }> => {
      let used: string | undefined;
      if (!callerAuth && options.auth) {
        used = await options.auth.authorization();
        if (used) headers.set("authorization", used);
        else headers.delete("authorization");
      }
      try {
        const res = await doFetch(call.url, { method: call.verb, headers, body: call.body, signal: linked.signal });
        return { res, used };
      } catch (err) {
        if (linked.signal.aborted) throw ConnectError.from(linked.signal.reason ?? err);
        const why = (err as { cause?: { message?: string } })?.cause?.message ?? (err as Error)?.message;
        throw clientError(
          Code.Unavailable,
          ClientReason.unreachable,
          `cannot reach ${new URL(call.url).origin}: ${why}`,
          err,
        );
      }
    };
    try {
      let { res, used } = await attempt();
      if (res.status === 401 && used && options.auth && (await options.auth.renew(used))) {
        await res.body?.cancel().catch(() => {});
        ({ res } = await attempt());
      }
      const expected = successStatusOf(method);
      if (res.status !== expected && !(res.status >= 200 && res.status < 300))
        throw errorFromResponse(res.status, res.headers, await res.text().catch(() => ""));
      return { res, call, signal: linked.signal, done: linked.done };
    } catch (err) {
      linked.done();
      throw err;
    }
  }

  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: MessageInitShape<I>,
    ): Promise<UnaryResponse<I, O>> {
      const deadline = timeoutMs ?? options.unaryTimeoutMs;
      const {
        res,
        call,
        done,
        signal: linked,
      } = await send(method, input, signal, deadline, header, "application/json");
      try {
        const text =
          res.status === 204
            ? ""
            : await res.text().catch((err: unknown) => {
                if (linked.aborted) throw ConnectError.from(linked.reason ?? err);
                throw clientError(Code.Unavailable, ClientReason.unreachable, `${call.url}: the answer broke off`, err);
              });
        let json: JsonValue = {};
        if (text) {
          try {
            json = JSON.parse(text) as JsonValue;
          } catch (err) {
            throw clientError(Code.Unknown, ClientReason.protocolError, `${call.url}: the answer is not JSON`, err);
          }
        }
        // An additional binding without its own response_body takes the rule's.
        const selected = call.binding.responseBody || call.binding.rule.responseBody;
        if (selected) {
          const field = method.output.fields.find((f) => f.name === selected);
          json = { [field?.jsonName ?? selected]: json };
        }
        const message = fromJson(method.output, json, { ignoreUnknownFields: true });
        return { stream: false, service: method.parent, method, header: res.headers, message, trailer: new Headers() };
      } finally {
        done();
      }
    },

    async stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: AsyncIterable<MessageInitShape<I>>,
    ): Promise<StreamResponse<I, O>> {
      const framing = sseOf(method);
      if (method.methodKind !== "server_streaming" || !framing)
        throw new ConnectError(
          `${method.parent.typeName}/${method.name} is not an SSE stream`,
          Code.Unimplemented as number,
        );
      let request: MessageInitShape<I> | undefined;
      for await (const m of input) {
        request = m;
        break;
      }
      const sent = await send(method, request ?? {}, signal, timeoutMs, header, "text/event-stream");
      const { res } = sent;
      if (!res.headers.get("content-type")?.includes("text/event-stream") || !res.body) {
        sent.done();
        await res.body?.cancel().catch(() => {});
        throw clientError(
          Code.Unknown,
          ClientReason.protocolError,
          `${sent.call.url}: the answer is not an event stream`,
        );
      }
      const body = res.body;
      async function* messages() {
        try {
          for await (const ev of readSse(body, sent.signal)) {
            const decoded = decodeSseEvent(method.output, framing!, ev);
            if (!decoded) continue;
            yield decoded.message as never;
            if (decoded.terminal) return;
          }
        } catch (err) {
          throw sent.signal.aborted ? ConnectError.from(sent.signal.reason ?? err) : err;
        } finally {
          sent.done();
        }
      }
      return {
        stream: true,
        service: method.parent,
        method,
        header: res.headers,
        message: messages(),
        trailer: new Headers(),
      };
    },
  };
}

/** One signal for the caller's and the deadline's; done() clears the timer. */
function linkSignals(
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
): { signal: AbortSignal; done(): void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal?.reason);
  if (signal?.aborted) controller.abort(signal.reason);
  else signal?.addEventListener("abort", onAbort, { once: true });
  const timer =
    timeoutMs !== undefined && timeoutMs > 0
      ? setTimeout(
          () =>
            controller.abort(new ConnectError(`deadline of ${timeoutMs} ms exceeded`, Code.DeadlineExceeded as number)),
          timeoutMs,
        )
      : undefined;
  return {
    signal: controller.signal,
    done() {
      if (timer !== undefined) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    },
  };
}

function randomId(): string {
  return globalThis.crypto.randomUUID();
}
