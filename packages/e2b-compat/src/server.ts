import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Filesystem } from "@platform/gen/e2b/filesystem/filesystem_pb";
import { Process } from "@platform/gen/e2b/process/process_pb";
import type { Logger } from "pino";
import type { ComputePort } from "./compute-port.ts";
import { withConnectErrors } from "./connect-errors.ts";
import { type ApiKeyVerifier, ControlPlane } from "./control-plane.ts";
import { envdSandbox } from "./envd-access.ts";
import { handleFiles } from "./envd-files.ts";
import { filesystemImpl } from "./envd-filesystem.ts";
import { processImpl } from "./envd-process.ts";
import { headersOf, sendError, sendJson } from "./http-util.ts";
import { SandboxRecords } from "./records.ts";

export interface E2bCompatOptions {
  /** compute.v1.ComputeService (grpcCompute). */
  compute: ComputePort;
  /** A platform API key (or a person's JWT) → its organization: identity's VerifyToken. */
  verify: ApiKeyVerifier;
  logger: Logger;
  host?: string;
  /** 0: any free port. */
  port: number;
}

export interface E2bCompat {
  server: Server;
  /** http://host:port: the SDK's E2B_API_URL and E2B_SANDBOX_URL. */
  url: string;
  records: SandboxRecords;
  /** Stops listening and ends the running commands (the sandboxes stay compute's). */
  close(): Promise<void>;
}

const HEALTH = new Set(["/livez", "/readyz", "/healthz"]);
const ENVD_RPC = /^\/(process\.Process|filesystem\.Filesystem)\//;

/**
 * One listener for both halves of E2B's surface: the control plane (the
 * SDK's E2B_API_URL) and the envd of every sandbox (its E2B_SANDBOX_URL; the
 * SDK names the sandbox in the E2b-Sandbox-Id header, as E2B's own
 * client proxy routes it).
 */
export async function startE2bCompat(options: E2bCompatOptions): Promise<E2bCompat> {
  const { compute, logger } = options;
  const records = new SandboxRecords();
  const control = new ControlPlane(compute, records, options.verify);
  const logInternal = (err: unknown) => logger.error({ err }, "e2b-compat: internal error");
  const rpc = connectNodeAdapter({
    routes: (router) => {
      router.service(Process, withConnectErrors(processImpl(records), logInternal));
      router.service(Filesystem, withConnectErrors(filesystemImpl(records, compute), logInternal));
    },
    jsonOptions: { ignoreUnknownFields: true },
    readMaxBytes: 1024 * 1024,
  });
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://e2b.invalid");
    try {
      if (ENVD_RPC.test(url.pathname)) return rpc(req, res);
      if (HEALTH.has(url.pathname) && !req.headers["e2b-sandbox-id"]) {
        // The launcher's and `platform status`'s probes; a sandbox's envd /health is below.
        sendJson(res, 200, { status: "ok" });
        return;
      }
      if (url.pathname === "/health") {
        envdSandbox(records, headersOf(req));
        res.writeHead(204).end();
        return;
      }
      if (url.pathname === "/files") return await handleFiles(req, res, url, records, compute);
      return await control.handle(req, res, url);
    } catch (err) {
      sendError(res, err, logInternal);
    }
  };
  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host ?? "127.0.0.1", () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const url = `http://${addr.address}:${addr.port}`;
  logger.info({ url }, "e2b-compat listening");
  return {
    server,
    url,
    records,
    async close() {
      for (const r of records.all()) {
        r.processes.killAll();
        records.delete(r.sandboxId);
      }
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
