import * as http2 from "node:http2";
import { Code } from "@connectrpc/connect";

/** A request's Headers as the headers of an HTTP/2 request. */
export function outgoing(header: Headers): http2.OutgoingHttpHeaders {
  const headers: http2.OutgoingHttpHeaders = {};
  header.forEach((v, k) => {
    headers[k] = v;
  });
  return headers;
}

/** An HTTP/2 answer's headers or trailers as a Headers object, without the pseudo-headers. */
export function copyInto(target: Headers, from: http2.IncomingHttpHeaders): void {
  for (const [k, v] of Object.entries(from)) {
    if (k.startsWith(":") || v === undefined) continue;
    if (Array.isArray(v)) for (const one of v) target.append(k, one);
    else target.set(k, String(v));
  }
}

/** gRPC's mapping of HTTP/2 reset codes (PROTOCOL-HTTP2.md, "Errors"). */
export function resetCode(rst: number): Code {
  switch (rst) {
    case http2.constants.NGHTTP2_REFUSED_STREAM:
      return Code.Unavailable;
    case http2.constants.NGHTTP2_CANCEL:
      return Code.Canceled;
    case http2.constants.NGHTTP2_ENHANCE_YOUR_CALM:
      return Code.ResourceExhausted;
    case http2.constants.NGHTTP2_INADEQUATE_SECURITY:
      return Code.PermissionDenied;
    default:
      return Code.Internal;
  }
}
