import type { PlatformError } from "@platform/errors";
import type { Envelope } from "../envelope.ts";
import { retryAfterOf } from "../errors.ts";
import { type NodeRequest, type NodeResponse, sendJson } from "../http/node-io.ts";

/**
 * Answers `err` before the request was routed (ServerOptions.shed): the same
 * status, body and Retry-After a handler raising it would get, while the
 * request's body is drained unread so a kept-alive connection stays usable.
 */
export function refuse(envelope: Envelope, req: NodeRequest, res: NodeResponse, err: PlatformError): void {
  req.resume();
  const retryAfter = retryAfterOf(err);
  if (retryAfter) res.setHeader("retry-after", retryAfter);
  const { status, body } = envelope.render(err);
  sendJson(res, status, body);
}
