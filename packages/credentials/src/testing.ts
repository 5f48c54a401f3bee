import net from "node:net";

/**
 * Loose variants of a genuine token that every entry point must refuse
 * (issue 14 item 4), for the tests of each service.
 */
export function looseTokenVariants(token: string): [what: string, variant: string][] {
  const parts = token.split(".");
  const mid = Math.floor(token.length / 2);
  const variants: [string, string][] = [
    ["leading space", ` ${token}`],
    ["trailing space", `${token} `],
    ["leading tab", `\t${token}`],
    ["trailing newline", `${token}\n`],
    ["tab inside", `${token.slice(0, mid)}\t${token.slice(mid)}`],
    ["newline inside", `${token.slice(0, mid)}\n${token.slice(mid)}`],
    ["space inside", `${token.slice(0, mid)} ${token.slice(mid)}`],
    ["NUL appended", `${token}\u0000`],
  ];
  if (parts.length === 3) {
    const [h, p, sig] = parts as [string, string, string];
    variants.push(
      ["padding on the signature", `${token}==`],
      ["one = of padding", `${token}=`],
      ["tab inside the signature", `${h}.${p}.${sig.slice(0, 10)}\t${sig.slice(10)}`],
      ["four parts", `${token}.${sig}`],
      ["empty signature", `${h}.${p}.`],
    );
  } else {
    variants.push(
      ["one more character", `${token}A`],
      ["uppercase prefix", token.replace(/^sk_(live|test)_/, (m) => m.toUpperCase())],
    );
  }
  return variants;
}

/** How HTTP itself treats an Authorization value: `same` = arrives as the exact header (RFC 9110 §5.5 drops surrounding whitespace). */
export type HeaderVariant = { what: string; value: string; http: "refused-by-service" | "refused-by-http" | "same" };

/** Authorization header values built from a genuine token, with what the service must answer. */
export function looseHeaderVariants(token: string): HeaderVariant[] {
  const out: HeaderVariant[] = [];
  for (const [what, variant] of looseTokenVariants(token)) {
    const value = `Bearer ${variant}`;
    // CR, LF and NUL cannot be in a header value: the HTTP parser answers 400 before any service code.
    const http = /[\r\n\0]/.test(variant) ? "refused-by-http" : "refused-by-service";
    if (what === "trailing space") out.push({ what, value, http: "same" });
    else if (what === "trailing newline")
      out.push({ what, value: `${value.trimEnd()}\r\n\tX`, http: "refused-by-http" });
    else if (what === "leading space") out.push({ what: "two spaces after Bearer", value, http: "refused-by-service" });
    else out.push({ what, value, http });
  }
  out.push(
    { what: "tab after Bearer", value: `Bearer\t${token}`, http: "refused-by-service" },
    { what: "no space after Bearer", value: `Bearer${token}`, http: "refused-by-service" },
    { what: "another scheme", value: `Basic ${token}`, http: "refused-by-service" },
    { what: "token without scheme", value: token, http: "refused-by-service" },
    { what: "whitespace around the whole value", value: ` Bearer ${token} `, http: "same" },
  );
  return out;
}

/** The exact-form headers every entry point accepts: RFC 7235 makes the scheme case-insensitive. */
export const acceptedHeaders = (token: string): string[] => [`Bearer ${token}`, `bearer ${token}`, `BEARER ${token}`];

/**
 * One HTTP/1.1 request written byte for byte on a socket, so no client
 * library trims or refuses the header under test. Returns the status.
 */
export function rawRequest(
  url: string,
  init: { method: string; path: string; authorization: string; body?: string; headers?: Record<string, string> },
): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  const body = init.body ?? "";
  const extra = Object.entries(init.headers ?? {})
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  const head = `${init.method} ${init.path} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: ${init.authorization}\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
  return new Promise((resolve, reject) => {
    // Written, not ended: a half-closed socket reads as a client that went away.
    const socket = net.connect(Number(port), hostname, () => socket.write(head + body));
    const chunks: Buffer[] = [];
    socket.on("data", (c) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: text.split("\r\n\r\n").slice(1).join("\r\n\r\n") });
    });
  });
}
