import * as http2 from "node:http2";
import { type DescMethod, type DescMethodUnary, fromBinary, type Message } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createContextValues,
  type Interceptor,
  type StreamRequest,
  type Transport,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import type { GrpcTransportOptions } from "@connectrpc/connect-node";
import { createMethodUrl, runStreamingCall, runUnaryCall } from "@connectrpc/connect/protocol";
import { requestHeader, validateResponse, validateTrailer } from "@connectrpc/connect/protocol-grpc";
import { directStream } from "./direct-stream.ts";
import { EnvelopeAssembler } from "./envelope-assembler.ts";
import { copyInto, outgoing, resetCode } from "./h2-answer.ts";
import { encodeEnveloped } from "./spliced-encoding.ts";

type SessionManager = NonNullable<GrpcTransportOptions["sessionManager"]>;

export interface DirectUnaryOptions {
  baseUrl: string;
  /** The HTTP/2 sessions the transport's other calls use. */
  sessions: SessionManager;
  /** The transport's interceptors: they run for these calls as for the others. */
  interceptors: Interceptor[];
  /** The unary and server-streaming methods called this way (direct-stream.ts); the rest go through `inner`. */
  methods: readonly DescMethod[];
  /** The largest answer taken, in bytes. */
  readMaxBytes: number;
}

/** What a unary and a server-streaming request of a direct call have alike. */
function callHead<M extends DescMethod>(
  baseUrl: string,
  method: M,
  timeout: number | undefined,
  header: Parameters<typeof requestHeader>[2],
  contextValues: ContextValues | undefined,
) {
  return {
    service: method.parent,
    method,
    requestMethod: "POST",
    url: createMethodUrl(baseUrl, method),
    header: requestHeader(true, timeout, header),
    contextValues: (contextValues ?? createContextValues()) as ContextValues,
  };
}

/**
 * A Transport whose unary calls of `methods` are plain gRPC written and read
 * here, the client-side counterpart of grpc-direct.ts; every other call goes
 * to `inner`. For messages carrying file data (compute's WriteFile and
 * ReadFile, 16 MiB a call) Connect's client copied the data three times on
 * the way out (the encoder's growth, its final join, the envelope) and
 * once on the way in (the envelope's reassembly, which also summed the
 * length of every chunk it held for each chunk that came: quadratic in
 * the chunks of a message). Each copy is a fresh 16 MiB ArrayBuffer, and
 * the external memory they add made V8 run a full mark-compact about once
 * a chunk. Here the large bytes field goes out as the caller's own array
 * (spliced-encoding.ts) and the answer is copied into one buffer as it
 * comes (envelope-assembler.ts). Headers,
 * deadline, cancellation, status and error details follow the gRPC
 * protocol as Connect's client does; the interceptors are the same.
 * Server-streaming methods of `methods` are read by direct-stream.ts.
 */
export function withDirectUnary(inner: Transport, o: DirectUnaryOptions): Transport {
  const direct = new Set<DescMethod>(o.methods);
  return {
    unary(method, signal, timeoutMs, header, input, contextValues) {
      if (!direct.has(method)) return inner.unary(method, signal, timeoutMs, header, input, contextValues);
      const timeout = timeoutMs === undefined || timeoutMs <= 0 ? undefined : timeoutMs;
      return runUnaryCall<typeof method.input, typeof method.output>({
        interceptors: o.interceptors,
        signal,
        timeoutMs: timeout,
        req: { stream: false, ...callHead(o.baseUrl, method, timeout, header, contextValues), message: input },
        next: (req) =>
          call(o, req as UnaryRequest) as Promise<UnaryResponse<typeof method.input, typeof method.output>>,
      });
    },
    stream(method, signal, timeoutMs, header, input, contextValues) {
      if (!direct.has(method) || method.methodKind !== "server_streaming")
        return inner.stream(method, signal, timeoutMs, header, input, contextValues);
      const timeout = timeoutMs === undefined || timeoutMs <= 0 ? undefined : timeoutMs;
      return runStreamingCall<typeof method.input, typeof method.output>({
        interceptors: o.interceptors,
        signal,
        timeoutMs: timeout,
        req: { stream: true, ...callHead(o.baseUrl, method, timeout, header, contextValues), message: input },
        next: (req) => directStream(o.sessions, o.readMaxBytes, req as StreamRequest) as never,
      });
    },
  };
}

async function call(o: DirectUnaryOptions, req: UnaryRequest): Promise<UnaryResponse> {
  const method = req.method as DescMethodUnary;
  const url = new URL(req.url);
  const stream = await o.sessions.request("POST", url.pathname + url.search, outgoing(req.header), {});
  return new Promise<UnaryResponse>((resolve, reject) => {
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      req.signal.removeEventListener("abort", onAbort);
      if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      reject(ConnectError.from(err, Code.Internal));
    };
    function onAbort() {
      fail(req.signal.reason ?? new ConnectError("the operation was aborted", Code.Canceled));
    }
    if (req.signal.aborted) return onAbort();
    req.signal.addEventListener("abort", onAbort);
    let status = 0;
    const header = new Headers();
    const trailer = new Headers();
    // Copied into one buffer of the message's size as the frames come (envelope-assembler.ts).
    const answer = new EnvelopeAssembler(o.readMaxBytes, "output");
    stream.on("response", (h) => {
      status = Number(h[":status"] ?? 0);
      copyInto(header, h);
    });
    stream.on("trailers", (t) => copyInto(trailer, t));
    stream.on("data", (chunk: Buffer) => {
      o.sessions.notifyResponseByteRead(stream);
      if (settled) return;
      try {
        answer.push(chunk);
      } catch (err) {
        fail(err);
      }
    });
    stream.on("error", fail);
    stream.on("end", () => {
      if (settled) return;
      try {
        const { headerError } = validateResponse(status, header);
        if (answer.empty) {
          // Trailers-only: the status came with the headers.
          if (headerError) throw headerError;
          validateTrailer(trailer, header);
          throw new ConnectError("protocol error: missing output message for unary method", Code.Unimplemented);
        }
        if (headerError)
          throw new ConnectError(
            "protocol error: received output message for unary method with error status",
            Code.Unknown,
          );
        validateTrailer(trailer, header);
        const message = fromBinary(method.output, answer.message()) as Message;
        settled = true;
        req.signal.removeEventListener("abort", onAbort);
        resolve({ stream: false, service: method.parent, method, header, message, trailer } as UnaryResponse);
      } catch (err) {
        fail(err);
      }
    });
    stream.on("close", () => {
      // Reset before its end (the server or the connection went away).
      if (!settled && stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR)
        fail(new ConnectError(`stream reset (HTTP/2 code ${stream.rstCode})`, resetCode(stream.rstCode)));
      else if (!settled) fail(new ConnectError("protocol error: stream closed without an answer", Code.Internal));
    });
    for (const piece of encodeEnveloped(method.input, req.message as Message, { anyOrder: true })) stream.write(piece);
    stream.end();
  });
}
