import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { isPublicAddress, publicOnlyLookup } from "@platform/rpc";

export type SendOptions = {
  timeoutMs: number;
  /** WEBHOOKS_ALLOW_PRIVATE_TARGETS. */
  allowPrivateTargets: boolean;
};

export type SendResult = {
  /** 0 when no response came. */
  statusCode: number;
  latencyMs: number;
  /** The response body's first 512 characters. */
  excerpt: string;
  /** Why no response came (timeout, refused target, connection error). */
  error: string;
};

const SETTING = "WEBHOOKS_ALLOW_PRIVATE_TARGETS";
const EXCERPT_CHARS = 512;
const READ_LIMIT = 4096;
const guardedLookup = publicOnlyLookup(SETTING);

/**
 * One POST: no redirect is followed (node's http never does: a 3xx is a
 * failed attempt like any other non-2xx), the whole exchange is bounded by
 * timeoutMs, and unless allowed the target's addresses must be public, checked
 * on the very addresses the connection uses.
 */
export function postWebhook(
  target: string,
  headers: Record<string, string>,
  body: string,
  options: SendOptions,
): Promise<SendResult> {
  const started = performance.now();
  const done = (statusCode: number, excerpt: string, error: string): SendResult => ({
    statusCode,
    latencyMs: Math.round(performance.now() - started),
    excerpt,
    error,
  });
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return Promise.resolve(done(0, "", "invalid URL"));
  }
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (!options.allowPrivateTargets && isIP(host) && !isPublicAddress(host))
    return Promise.resolve(done(0, "", `${url.host} is not a public address (${SETTING} is off)`));
  const request = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let settled = false;
    const finish = (r: SendResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.destroy();
      resolve(r);
    };
    const req = request(
      url,
      {
        method: "POST",
        headers: { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        ...(!options.allowPrivateTargets && { lookup: guardedLookup }),
        agent: false,
      },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (c: Buffer) => {
          if (size < READ_LIMIT) chunks.push(c);
          size += c.length;
          if (size >= READ_LIMIT) end();
        });
        const end = () =>
          finish(
            done(
              res.statusCode ?? 0,
              Buffer.concat(chunks).subarray(0, READ_LIMIT).toString("utf8").slice(0, EXCERPT_CHARS),
              "",
            ),
          );
        res.on("end", end);
        res.on("error", end);
      },
    );
    const timer = setTimeout(() => finish(done(0, "", `timed out after ${options.timeoutMs} ms`)), options.timeoutMs);
    req.on("error", (err: NodeJS.ErrnoException) => finish(done(0, "", err.message.slice(0, 300))));
    req.end(body);
  });
}
