import { Code, ConnectError } from "@connectrpc/connect";
import type { NodeRequest, NodeResponse } from "../transcode/rest-handler.ts";
import type { ShutdownHooks } from "./shutdown-hooks.ts";

/** The first value of a request header. */
export function headerOf(req: NodeRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The request's headers as a Headers object, without those `skip` names. */
export function headersOf(req: NodeRequest, skip: (name: string) => boolean): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || skip(k)) continue;
    for (const one of Array.isArray(v) ? v : [v]) h.append(k, one);
  }
  return h;
}

/**
 * The signal of one call: aborted when its client goes away before the
 * response was ended, or when a shutdown gives up waiting. `release` when
 * the call is over. (Whether the response was ended is `writableEnded`: an
 * HTTP/2 response reports `writableFinished` once its stream is gone,
 * answered or not.)
 */
export function callAbort(res: NodeResponse, shutdown: ShutdownHooks): { controller: AbortController; release(): void } {
  const controller = new AbortController();
  const onClose = () => {
    if (!res.writableEnded) controller.abort(new ConnectError("client went away", Code.Canceled));
  };
  res.on("close", onClose);
  const unhook = shutdown.add(() => controller.abort(new ConnectError("server shutting down", Code.Unavailable)));
  return {
    controller,
    release() {
      res.off("close", onClose);
      unhook();
    },
  };
}
