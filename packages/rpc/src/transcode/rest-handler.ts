import type * as http from "node:http";
import {
  create,
  type DescField,
  type DescMethodServerStreaming,
  type DescMethodUnary,
  fromJson,
  type JsonObject,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import { ConnectError, type ContextValues, type Transport } from "@connectrpc/connect";
import type { PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { type DirectTransport, forgetRequestHeader, sentHeaders } from "../calls/direct-transport.ts";
import { oneMessage } from "../calls/one-message.ts";
import { whenOpened } from "../calls/open-stream.ts";
import { requestLimitOf } from "../calls/request-limit.ts";
import type { Envelope, TransportFault } from "../envelope.ts";
import { fromConnectError, platformErrorOf } from "../errors.ts";
import {
  CallAbort,
  forgetAuthorization,
  forgetSentHeaders,
  headersOf,
  isGone,
  type NodeRequest,
  type NodeResponse,
  sendJson,
} from "../http/node-io.ts";
import type { CallController } from "../http/adopt.ts";
import type { ShutdownHooks } from "../http/shutdown-hooks.ts";
import {
  BindError,
  type CutBytes,
  emptyJsonOf,
  jsonBody,
  messageToJson,
  type OutputJsonOptions,
  parseBody,
  requestFromJson,
  resolveFieldPath,
  setJsonPath,
  valueFromString,
} from "./json.ts";
import { lookupRoute, type Route } from "./routes.ts";
import { SseFramer } from "./sse.ts";
import { SsePinger, SseRelay, type SseRelayDeps } from "./sse-relay.ts";

export interface RestOptions {
  routes: Route[];
  transport: DirectTransport;
  /** A call's context values, as the transport would make them, for the request `res` answers. */
  contextValues: (res: NodeResponse) => ContextValues;
  envelope: Envelope;
  bodyLimitBytes: number;
  requestTimeoutMs?: number;
  /** Deadline of SSE streams; unset: none (a model reply may take minutes). */
  streamTimeoutMs?: number;
  ssePingMs: number;
  json: OutputJsonOptions;
  /** Reject request bodies with fields the message does not have. */
  strictBody: boolean;
  /** The stream's error event for a mid-stream failure, when the contract has none. */
  sseErrorEvent?: (err: PlatformError, method: DescMethodServerStreaming) => Message | undefined;
  /** Aborts open calls when the server shuts down past its grace period. */
  shutdown: ShutdownHooks;
  /** The request matched `route` (metrics label it by its template). */
  routed?: (req: NodeRequest, route: Route) => void;
  /** An SSE response began streaming (metrics). */
  sseOpened?: (route: Route) => void;
  /** An SSE response that began streaming ended (once for each sseOpened). */
  sseClosed?: (route: Route) => void;
}

// Headers that belong to the HTTP or RPC framing, not to the application.
const hopHeaders = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "upgrade",
  "content-length",
  "content-type",
  "content-encoding",
  "accept-encoding",
  "accept-post",
  "trailer",
  "host",
  "date",
  "vary",
  "http2-settings",
]);

function isFramingHeader(name: string): boolean {
  return hopHeaders.has(name) || name.startsWith(":") || name.startsWith("connect-") || name.startsWith("grpc-");
}

function copyHeaders(from: Headers | undefined, res: NodeResponse): void {
  if (!from) return;
  from.forEach((v, k) => {
    if (!isFramingHeader(k)) res.setHeader(k, v);
  });
}

class Fault extends Error {
  constructor(
    readonly kind: TransportFault,
    message: string,
  ) {
    super(message);
  }
}

const NO_BODY = Buffer.alloc(0);

async function readBody(req: NodeRequest, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > limit) throw new Fault("payload_too_large", `request body exceeds ${limit} bytes`);
  // An HTTP/1.1 request with neither header has no body (RFC 9112, 6.3).
  // Not read at all: reading a stream to its end with `for await` leaves
  // the end-of-stream listeners and their closures on the request, kept for
  // as long as it stays open (an SSE follow: hours).
  if (req.httpVersionMajor === 1 && req.headers["content-length"] === undefined && !req.headers["transfer-encoding"])
    return NO_BODY;
  // With a declared length the pieces are copied into one buffer as they
  // come: held until the end, the socket's 64 KiB buffers of a 16 MiB body
  // outlived a few young-generation collections, and V8 then needed a full
  // mark-compact to free them (about one a file chunk).
  const into =
    Number.isSafeInteger(declared) && declared > 0 && !req.headers["transfer-encoding"]
      ? Buffer.allocUnsafe(declared)
      : undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  let filled = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      if (size + chunk.length > limit) throw new Fault("payload_too_large", `request body exceeds ${limit} bytes`);
      // More than declared (HTTP/2 does not hold a peer to content-length): the rest joined after.
      if (into && chunks.length === 0 && filled + chunk.length <= into.length) {
        into.set(chunk, filled);
        filled += chunk.length;
      } else chunks.push(chunk);
      size += chunk.length;
    }
  } catch (e) {
    if (e instanceof Fault) throw e;
    // The client aborted or the request timed out while sending its body.
    throw new Fault("invalid_request", "request body not received");
  }
  if (!into) return Buffer.concat(chunks);
  if (chunks.length === 0) return filled === into.length ? into : into.subarray(0, filled);
  return Buffer.concat([into.subarray(0, filled), ...chunks]);
}

function isJsonContentType(ct: string | undefined): boolean {
  if (!ct) return false;
  const type = ct.split(";")[0]!.trim().toLowerCase();
  return type === "application/json" || (type.startsWith("application/") && type.endsWith("+json"));
}

const OCTET_STREAM = "application/octet-stream";

function isOctetStream(ct: string | undefined): boolean {
  return ct !== undefined && ct.split(";")[0]!.trim().toLowerCase() === OCTET_STREAM;
}

/** Accept names application/octet-stream (not merely a wildcard: JSON stays the default), without q=0. */
function acceptsOctetStream(accept: string | undefined): boolean {
  if (!accept) return false;
  for (const range of accept.split(",")) {
    const [type, ...params] = range.split(";");
    if (type!.trim().toLowerCase() !== OCTET_STREAM) continue;
    return !params.some((p) => /^\s*q\s*=\s*0(\.0*)?\s*$/i.test(p));
  }
  return false;
}

/** A scalar field's value as a header: its JSON form, non-ASCII escaped as JSON does (a header carries Latin-1 only). */
function headerValue(field: DescField, value: unknown): string {
  if (field.fieldKind === "enum") return field.enum.values.find((v) => v.number === value)?.name ?? String(value);
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  if (typeof value === "string")
    return JSON.stringify(value).replace(
      /[\u007f-\uffff]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
    );
  return String(value);
}

/** Builds the request message of a route from path, query, body and headers. */
function buildRequest(
  route: Route,
  values: Map<string, string>,
  url: URL,
  body: Buffer,
  req: NodeRequest,
  strictBody: boolean,
): Message {
  const input = route.method.input;
  let root: JsonObject = {};
  let cut: CutBytes | undefined;
  // raw_bytes: the body is that field's bytes, and the query binds the other fields as for a body field.
  const raw = route.rawRequest && isOctetStream(req.headers["content-type"]) ? route.rawRequest : undefined;
  const bodyBound = raw ?? route.bodyField;
  if (body.length > 0 && !raw) {
    if (route.body === "") throw new Fault("invalid_request", "this route takes no request body");
    if (!isJsonContentType(req.headers["content-type"]))
      throw new Fault("unsupported_media_type", "Content-Type must be application/json");
    let parsed: JsonValue;
    try {
      if (route.body === "*") ({ json: parsed, cut } = parseBody(input, body));
      else parsed = JSON.parse(body.toString("utf8"));
    } catch {
      throw new Fault("invalid_request", "malformed JSON body");
    }
    if (route.body === "*") {
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
        throw new Fault("invalid_request", "request body must be a JSON object");
      root = parsed;
    } else if (route.bodyField) {
      root = { [route.bodyField.jsonName]: parsed };
    }
  }
  try {
    for (const [path, value] of values) {
      const fields = route.pathFields.get(path)!;
      setJsonPath(root, fields, valueFromString(fields[fields.length - 1]!, value, `path parameter ${path}`));
    }
    const seenSingular = new Set<string>();
    for (const [key, value] of url.searchParams) {
      if (route.body === "*" && !raw) throw new BindError(`unknown query parameter "${key}"`);
      let fields: ReturnType<typeof resolveFieldPath>;
      try {
        fields = resolveFieldPath(input, key.split("."));
      } catch {
        throw new BindError(`unknown query parameter "${key}"`);
      }
      const dotted = fields.map((f) => f.name).join(".");
      if (fields[0] === bodyBound || route.pathFields.has(dotted))
        throw new BindError(`query parameter "${key}" is bound by the path or body`);
      const last = fields[fields.length - 1]!;
      if (last.fieldKind !== "list") {
        if (seenSingular.has(dotted)) throw new BindError(`query parameter "${key}" given more than once`);
        seenSingular.add(dotted);
      }
      setJsonPath(root, fields, valueFromString(last, value, `query parameter ${key}`), last.fieldKind === "list");
    }
    const resume = route.sse?.resumeField;
    const lastEventId = req.headers["last-event-id"];
    if (resume && typeof lastEventId === "string" && lastEventId !== "" && !seenSingular.has(resume)) {
      const fields = resolveFieldPath(input, [resume]);
      setJsonPath(root, fields, valueFromString(fields[0]!, lastEventId, "Last-Event-ID"));
    }
  } catch (e) {
    if (e instanceof BindError) throw new Fault("invalid_request", e.message);
    throw e;
  }
  let message: Message;
  try {
    message = requestFromJson(input, root, { ignoreUnknownFields: !strictBody }, cut);
  } catch (e) {
    throw new Fault("invalid_request", `invalid request body: ${(e as Error).message}`);
  }
  // The body as it came (a view, no copy): the implementation reads request bytes, never changes them.
  if (raw) (message as unknown as Record<string, unknown>)[raw.localName] = body;
  return message;
}

/**
 * The request of a `tolerant_body` route whose body failed to bind: its
 * fields that do bind (unknown fields and Content-Type ignored), else the
 * empty request, so a contract that always succeeds never answers 400.
 */
function tolerantRequest(route: Route, body: Buffer): Message {
  try {
    const parsed: JsonValue = JSON.parse(body.toString("utf8"));
    if (route.body === "*" && parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) {
      return fromJson(route.method.input, parsed, { ignoreUnknownFields: true }) as Message;
    }
  } catch {
    // Falls through to the empty request.
  }
  return create(route.method.input) as Message;
}

export interface RestHandlerDeps extends RestOptions {
  /** The logger of the request `res` answers. */
  logger: (res: NodeResponse) => Logger;
}

/**
 * Serves the REST routes: resolves the route, builds the request message and
 * calls the RPC through the in-process Connect transport, so the router's
 * interceptors run exactly as for gRPC and Connect calls.
 */
export function createRestHandler(o: RestHandlerDeps) {
  const relayDeps: SseRelayDeps = {
    pinger: new SsePinger(o.ssePingMs),
    broke: (res, err) => {
      o.logger(res).error({ err }, "request failed");
      res.destroy();
    },
    warn: (res, err) =>
      o
        .logger(res)
        .warn({ err: { code: err.code, reason: err.reason, message: err.message } }, "stream failed mid-way"),
    errorEvent: o.sseErrorEvent,
    closed: o.sseClosed,
  };
  const framers = new Map<Route, SseFramer>();
  const framerOf = (route: Route) => {
    let f = framers.get(route);
    if (!f) framers.set(route, (f = new SseFramer(route.method.output, route.sse!, o.json)));
    return f;
  };

  const sendError = (res: NodeResponse, err: PlatformError, extraHeaders?: Headers) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    copyHeaders(extraHeaders, res);
    // A handler's PlatformError is rendered as it was raised (errors.ts:
    // platformErrorOf); the ConnectError carries only the headers with it.
    const { status, body } = o.envelope.render(err);
    sendJson(res, status, body);
  };

  return async function handleRest(req: NodeRequest, res: NodeResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const rawPath = (req.url ?? "/").split("?")[0]!;
    const found = lookupRoute(o.routes, req.method ?? "GET", rawPath);
    if (found.kind === "not_found") {
      sendError(res, o.envelope.fault("not_found", `no route for ${req.method} ${url.pathname}`));
      return;
    }
    if (found.kind === "method_not_allowed") {
      res.setHeader("allow", found.allow.join(", "));
      sendError(res, o.envelope.fault("method_not_allowed", `method ${req.method} not allowed`));
      return;
    }
    const { route, values } = found;
    o.routed?.(req, route);
    let message: Message;
    try {
      const body = await readBody(req, requestLimitOf(route.method, o.bodyLimitBytes));
      try {
        message = buildRequest(route, values, url, body, req, o.strictBody);
      } catch (e) {
        if (!(e instanceof Fault) || !route.tolerantBody) throw e;
        message = tolerantRequest(route, body);
      }
    } catch (e) {
      if (e instanceof Fault) {
        // The unread rest of an HTTP/1.1 body would be parsed as the next
        // request; HTTP/2 streams need (and allow) no such header.
        if (e.kind === "payload_too_large" && req.httpVersionMajor === 1) res.setHeader("connection", "close");
        sendError(res, o.envelope.fault(e.kind, e.message));
        return;
      }
      throw e;
    }
    const headers = headersOf(req, isFramingHeader);
    const abort = new CallAbort(res, o.shutdown);
    // Returns once the stream is open (its relay goes on alone): this frame
    // (the URL, the route's match, the body and the request message) is not
    // held for as long as the stream is open.
    if (route.sse) {
      await serveStream(res, route, message, headers, abort);
      // The call checked its credential as it started; the stream may stay open for hours.
      forgetAuthorization(req);
      return;
    }
    try {
      const raw = route.rawResponse && acceptsOctetStream(req.headers.accept) ? route.rawResponse : undefined;
      await serveUnary(res, route, message, headers, abort.controller, raw);
    } finally {
      abort.release();
    }
  };

  async function serveUnary(
    res: NodeResponse,
    route: Route,
    message: Message,
    headers: Headers,
    controller: CallController,
    raw: Route["rawResponse"],
  ) {
    let out: Awaited<ReturnType<Transport["unary"]>>;
    try {
      // The call's controller, not its signal: none is made unless the call asks for it.
      out = await o.transport.unaryWith(
        route.method as DescMethodUnary,
        controller,
        o.requestTimeoutMs,
        headers,
        message as never,
        o.contextValues(res),
      );
    } catch (e) {
      // No one to answer (the controller is the call's too: it is aborted whenever the call failed).
      if (isGone(res)) return;
      const ce = ConnectError.from(e);
      sendError(res, platformErrorOf(ce) ?? fromConnectError(ce), ce.metadata);
      return;
    }
    const sent = sentHeaders(out);
    copyHeaders(sent.header, res);
    copyHeaders(sent.trailer, res);
    if (route.successStatus === 204) {
      res.writeHead(204);
      res.end();
      return;
    }
    // A cache must not answer one representation for the other.
    if (route.rawResponse) res.setHeader("vary", "accept");
    if (raw) {
      const fields = out.message as unknown as Record<string, unknown>;
      const data = (fields[raw.field.localName] as Uint8Array | undefined) ?? new Uint8Array(0);
      for (const h of raw.headers) res.setHeader(h.name, headerValue(h.field, fields[h.field.localName]));
      res.writeHead(route.successStatus, { "content-type": OCTET_STREAM, "content-length": data.length });
      res.end(data);
      return;
    }
    let json: JsonValue = messageToJson(route.method.output, out.message as Message, o.json);
    if (route.responseBodyField) {
      json = (json as JsonObject)[route.responseBodyField.jsonName] ?? emptyJsonOf(route.responseBodyField);
    }
    const body = jsonBody(json);
    res.writeHead(route.successStatus, { "content-type": "application/json", "content-length": body.length });
    res.end(body);
  }

  async function serveStream(
    nodeRes: NodeResponse,
    route: Route,
    message: Message,
    headers: Headers,
    abort: CallAbort,
  ) {
    // Both response kinds have write/flushHeaders; their union type does not.
    const res = nodeRes as http.ServerResponse;
    let relaying = false;
    try {
      relaying = await startStream(res, route, message, headers, abort);
    } finally {
      if (!relaying) abort.release();
    }
  }

  /** Answers the call's first outcome: an error envelope (false), or the SSE headers and a relay started (true). */
  async function startStream(
    res: http.ServerResponse,
    route: Route,
    message: Message,
    headers: Headers,
    abort: CallAbort,
  ): Promise<boolean> {
    const framer = framerOf(route);
    const method = route.method as DescMethodServerStreaming;
    let it: AsyncIterator<Message>;
    let first: Promise<IteratorResult<Message>>;
    let out: Awaited<ReturnType<Transport["stream"]>> | undefined;
    try {
      const values = o.contextValues(res);
      const opened = whenOpened(values);
      out = await o.transport.stream(
        method,
        abort.signal,
        o.streamTimeoutMs,
        headers,
        oneMessage(message as never),
        values,
      );
      it = (out.message as AsyncIterable<Message>)[Symbol.asyncIterator]();
      first = it.next();
      // An error before the first message (or before the handler opened the
      // stream with openStream) still gets the HTTP error envelope.
      await opened.orFirst(first);
      copyHeaders(sentHeaders(out).header, res);
    } catch (e) {
      if (isGone(res)) return false;
      const ce = ConnectError.from(e);
      // Headers the handler set before failing (e.g. Retry-After) still count.
      copyHeaders(out && sentHeaders(out).header, res);
      sendError(res, platformErrorOf(ce) ?? fromConnectError(ce), ce.metadata);
      return false;
    }
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
    });
    res.flushHeaders?.();
    forgetSentHeaders(res);
    // The relay holds what an open stream needs, not this frame (the call's
    // headers, values and request message). The handler read what it needed
    // of the request headers as it opened the stream (credential,
    // Last-Event-ID): the call lets them go too.
    forgetRequestHeader(out);
    o.sseOpened?.(route);
    new SseRelay(res, route, framer, it, abort, relayDeps).start(first);
    return true;
  }
}
