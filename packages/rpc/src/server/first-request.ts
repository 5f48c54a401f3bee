import type * as http from "node:http";

/**
 * What ServerOptions.shed is asked with: a request's method, target and
 * headers (lower-case names), before anything else is made for it. A
 * NodeRequest is one; so is the head of a new connection's first request
 * read from its first bytes (parseFirstHead).
 */
export interface RequestHead {
  method?: string;
  url?: string;
  headers: http.IncomingHttpHeaders;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// A path as an origin-form target: no spaces, controls or non-ASCII bytes.
const TARGET = /^\/[\x21-\x7e]*$/;

/**
 * The head of an HTTP/1.1 request that starts `bytes` and ends in them
 * (request line, header fields, the empty line), parsed strictly: anything
 * this does not read exactly as Node's parser would (another version, an
 * absolute-form target, a folded or malformed field, a field given twice, no
 * Host, a head not whole in these bytes) gives undefined, and the request is left
 * to the HTTP parser. Values are trimmed of spaces and tabs, names lower-cased.
 */
export function parseFirstHead(bytes: Buffer, maxBytes = 8192): RequestHead | undefined {
  const end = bytes.indexOf("\r\n\r\n", 0, "latin1");
  if (end < 0 || end > maxBytes) return undefined;
  const text = bytes.toString("latin1", 0, end);
  const lines = text.split("\r\n");
  const first = lines[0]!;
  const sp1 = first.indexOf(" ");
  const sp2 = first.indexOf(" ", sp1 + 1);
  if (sp1 <= 0 || sp2 < 0 || first.slice(sp2 + 1) !== "HTTP/1.1") return undefined;
  const method = first.slice(0, sp1);
  const url = first.slice(sp1 + 1, sp2);
  if (!TOKEN.test(method) || !TARGET.test(url)) return undefined;
  const headers: http.IncomingHttpHeaders = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(":");
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon).toLowerCase();
    if (!TOKEN.test(name) || Object.hasOwn(headers, name)) return undefined;
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    // Controls (but tab) in a value: the parser's to refuse.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: that is the check
    if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) return undefined;
    headers[name] = value;
  }
  // Node's server answers 400 to an HTTP/1.1 request without a Host (requireHostHeader).
  if (headers.host === undefined) return undefined;
  return { method, url, headers };
}
