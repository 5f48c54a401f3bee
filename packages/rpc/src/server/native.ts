import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { CallValues } from "../calls/call-values.ts";
import { requestInfoKey } from "../context.ts";
import { boundStatusHeaders } from "../error-bounds.ts";
import type { NodeRequest, NodeResponse } from "../http/node-io.ts";
import { requestInfoOf } from "./requests.ts";

/**
 * Serves a request through Connect's own handler (gRPC with JSON or
 * compression, client and bidi streams, gRPC-Web, Connect). Unary calls that
 * bring no deadline get REQUEST_TIMEOUT (`requestTimeoutMs`, 0: none).
 */
export async function serveNative(
  handler: UniversalHandler,
  req: NodeRequest,
  res: NodeResponse,
  requestTimeoutMs: number,
): Promise<void> {
  const info = requestInfoOf(res);
  const values = info ? new CallValues().set(requestInfoKey, info) : undefined;
  const ureq = universalRequestFromNodeRequest(req, res, undefined, values);
  if (handler.method.methodKind === "unary" && requestTimeoutMs > 0) {
    const ct = ureq.header.get("content-type") ?? "";
    if (ct.startsWith("application/grpc")) {
      if (!ureq.header.has("grpc-timeout")) ureq.header.set("grpc-timeout", `${requestTimeoutMs}m`);
    } else if (!ureq.header.has("connect-timeout-ms")) {
      ureq.header.set("connect-timeout-ms", String(requestTimeoutMs));
    }
  }
  const ures = await handler(ureq);
  // Connect writes the status when the body ends; its own protocol errors
  // never met the error interceptor, so their grpc-message is bounded here.
  await universalResponseToNodeResponse(
    {
      status: ures.status,
      body: ures.body,
      get header() {
        return ures.header && boundStatusHeaders(ures.header);
      },
      get trailer() {
        return ures.trailer && boundStatusHeaders(ures.trailer);
      },
    },
    res,
  );
}
