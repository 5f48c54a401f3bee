import { ConnectError } from "@connectrpc/connect";
import { codeName, PlatformError } from "@platform/errors";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";

/**
 * The one bound on every error message a service sends (gRPC `grpc-message`,
 * Connect and REST envelopes, SSE error events), and on the ErrorInfo values
 * that travel with it in `grpc-status-details-bin`.
 *
 * Why these numbers: gRPC C core (python, C++, Ruby) starts refusing calls
 * whose response metadata is over 8 KiB (a growing share of them, as
 * RESOURCE_EXHAUSTED, up to a hard 16 KiB), and Node refuses to send a
 * header block over 64 KiB (it resets the stream). A message goes out twice,
 * percent-encoded in grpc-message (up to 3 bytes per UTF-8 byte) and
 * base64'd in the status details (4/3): 1 KiB of UTF-8 is at most ~4.4 KiB
 * of trailers; the ErrorInfo metadata adds at most ~2 KiB more.
 */
export const MAX_ERROR_MESSAGE_CHARS = 512;
export const MAX_ERROR_MESSAGE_BYTES = 1024;
/** Each ErrorInfo metadata key and value, in characters and UTF-8 bytes; at most this many entries are kept. */
export const MAX_ERROR_METADATA_KEY = 64;
export const MAX_ERROR_METADATA_VALUE = 128;
export const MAX_ERROR_METADATA_ENTRIES = 8;

const ELLIPSIS = "…";
const ELLIPSIS_BYTES = 3;

/** `text` cut to `maxChars` code points and `maxBytes` of UTF-8, ending in "…" when cut. */
export function boundText(
  text: string,
  maxChars = MAX_ERROR_MESSAGE_CHARS,
  maxBytes = MAX_ERROR_MESSAGE_BYTES,
): string {
  // Each UTF-16 unit is at most 3 bytes of UTF-8: most messages stop here.
  if (text.length <= maxChars && text.length * 3 <= maxBytes) return text;
  const budget = maxBytes - ELLIPSIS_BYTES;
  let chars = 0;
  let bytes = 0;
  let keep = 0; // end of the longest prefix that still leaves room for the ellipsis
  for (let i = 0; i < text.length; ) {
    const cp = text.codePointAt(i) as number;
    const units = cp > 0xffff ? 2 : 1; // never split a surrogate pair
    const size = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    chars++;
    bytes += size;
    i += units;
    if (chars <= maxChars - 1 && bytes <= budget) keep = i;
    if (chars > maxChars || bytes > maxBytes) return text.slice(0, keep) + ELLIPSIS;
  }
  return text;
}

/**
 * A ConnectError whose message and ErrorInfo metadata are within the bounds
 * (the same error object when they already are: the common case costs a
 * length check).
 */
export function boundConnectError(err: ConnectError): ConnectError {
  const message = boundText(err.rawMessage);
  let detailsChanged = false;
  const details = err.details.map((d) => {
    if (!("desc" in d) || d.desc.typeName !== ErrorInfoSchema.typeName) return d;
    const value = d.value as { metadata?: Record<string, string> };
    const entries = Object.entries(value.metadata ?? {});
    const bounded = entries
      .slice(0, MAX_ERROR_METADATA_ENTRIES)
      .map(
        ([k, v]) =>
          [
            boundText(k, MAX_ERROR_METADATA_KEY, MAX_ERROR_METADATA_KEY),
            boundText(v, MAX_ERROR_METADATA_VALUE, MAX_ERROR_METADATA_VALUE),
          ] as const,
      );
    if (
      bounded.length === entries.length &&
      bounded.every(([k, v], i) => k === entries[i]?.[0] && v === entries[i]?.[1])
    )
      return d;
    detailsChanged = true;
    return { ...d, value: { ...value, metadata: Object.fromEntries(bounded) } };
  });
  if (message === err.rawMessage && !detailsChanged) return err;
  const out = new ConnectError(message, err.code, err.metadata, undefined, err.cause);
  // Details relayed from another service's answer stay encoded, as they came.
  out.details = details;
  return out;
}

/** The ErrorInfo metadata key that carries a PlatformError's HTTP status (errors.ts). */
export const HTTP_STATUS_KEY = "http_status";

/**
 * A PlatformError whose message and extra fields are within the same bounds,
 * exactly as they would come back out of `boundConnectError(toConnectError(err))`:
 * the extra fields and the HTTP status share the ErrorInfo metadata's entries
 * (the status last, so with too many extras it is the one left out). The
 * same error object when nothing is cut.
 */
export function boundPlatformError(err: PlatformError): PlatformError {
  const metadata: Record<string, string> = { ...err.extra };
  if (err.httpStatus !== undefined) metadata[HTTP_STATUS_KEY] = String(err.httpStatus);
  const entries = Object.entries(metadata);
  const bounded = Object.fromEntries(
    entries
      .slice(0, MAX_ERROR_METADATA_ENTRIES)
      .map(([k, v]) => [
        boundText(k, MAX_ERROR_METADATA_KEY, MAX_ERROR_METADATA_KEY),
        boundText(v, MAX_ERROR_METADATA_VALUE, MAX_ERROR_METADATA_VALUE),
      ]),
  );
  const extra: Record<string, string> = {};
  let httpStatus: number | undefined;
  for (const [k, v] of Object.entries(bounded)) {
    if (k === HTTP_STATUS_KEY) {
      const n = Number(v);
      if (Number.isInteger(n) && n >= 100 && n <= 599) httpStatus = n;
    } else extra[k] = v;
  }
  const message = boundText(err.message);
  const reason = err.reason || codeName(err.code);
  const same =
    message === err.message &&
    reason === err.reason &&
    httpStatus === err.httpStatus &&
    Object.keys(extra).length === Object.keys(err.extra).length &&
    Object.entries(extra).every(([k, v]) => err.extra[k] === v);
  if (same) return err;
  return new PlatformError(err.code, reason, message, extra, { cause: err.cause ?? err, httpStatus });
}

/**
 * Bounds `grpc-message` in status headers or trailers that Connect's own
 * handler wrote (its protocol errors, e.g. a JSON decoding failure, may
 * quote the request and never pass through the error interceptor).
 */
export function boundStatusHeaders(headers: Headers): Headers {
  const raw = headers.get("grpc-message");
  // Percent-encoding takes up to 3 characters per byte: a bounded message is at most this long.
  if (raw === null || raw.length <= 3 * MAX_ERROR_MESSAGE_BYTES) return headers;
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    decoded = raw;
  }
  headers.set("grpc-message", encodeGrpcMessage(boundText(decoded)));
  // The details repeat the unbounded message; without them the status is still whole.
  headers.delete("grpc-status-details-bin");
  return headers;
}

/** Percent-encoding of grpc-message (gRPC over HTTP/2: printable ASCII except "%" stays). */
function encodeGrpcMessage(text: string): string {
  let out = "";
  for (const byte of Buffer.from(text)) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}
