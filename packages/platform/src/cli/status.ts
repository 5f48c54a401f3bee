import { readFileSync } from "node:fs";
import { request } from "node:https";
import { connect } from "node:net";
import { join } from "node:path";
import { serviceTlsFiles } from "@platform/pki/files";
import type { Context } from "./commands.ts";
import { CliError, dataDir, type Endpoints, knownEndpoints } from "./endpoints.ts";

export type ServiceStatus = {
  name: string;
  url: string;
  /** Answered /readyz with 200 (an internal mTLS port: accepts connections). */
  ready: boolean;
  /**
   * `ready`, `not_ready`, `unreachable`, or `listening` for an internal mTLS port
   * the CLI holds no certificate for (checked for a listener only).
   */
  state: string;
  version: string | null;
  ms: number;
  error?: string;
};

const NAMES: Record<keyof Endpoints, string> = {
  identity: "identity REST",
  agents: "agents REST",
  router: "runtime router",
  identityGrpc: "identity gRPC",
  computeGrpc: "compute gRPC",
  agentsGrpc: "agents gRPC",
  e2b: "e2b (E2B SDK)",
};

/**
 * `platform status`: every endpoint platform.json or the environment names,
 * its /readyz and the version it reports. Exit status 1 unless all are
 * ready. An https endpoint is an internal mutual-TLS port, which answers only
 * holders of a certificate of the platform's CA: with the launcher's operator
 * certificate readable (the same user, on the same machine) it is asked like
 * the others; without it, only checked for a listener.
 */
export async function status(ctx: Context, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const { endpoints, path } = knownEndpoints(env);
  const named = (Object.keys(NAMES) as Array<keyof Endpoints>)
    .filter((k) => endpoints[k])
    .map((k) => ({ name: NAMES[k], url: endpoints[k]! }));
  if (named.length === 0) {
    throw new CliError(
      `no endpoints: start the platform (bash scripts/run.sh) or set PLATFORM_IDENTITY_URL and the others (looked in ${path})`,
    );
  }
  const operator = operatorTls(env);
  const results = await Promise.all(named.map((e) => probe(e.name, e.url, operator)));
  const ok = results.every((r) => r.ready);
  if (ctx.io.json) {
    ctx.io.value({ ok, services: results });
  } else {
    for (const r of results) {
      const detail = r.error ? `  (${r.error})` : "";
      ctx.io.line(
        `${r.ready ? "✓" : "✗"} ${r.name.padEnd(15)} ${r.url.padEnd(28)} ${r.state.padEnd(11)} ${r.version ?? "-"}  ${r.ms} ms${detail}`,
      );
    }
  }
  return ok;
}

type ClientTls = { ca: Buffer; cert: Buffer; key: Buffer };

/** The launcher's operator certificate under <data>/tls, if this user can read it. */
function operatorTls(env: NodeJS.ProcessEnv): ClientTls | undefined {
  const files = serviceTlsFiles(join(dataDir(env), "tls"), "operator");
  try {
    return { ca: readFileSync(files.caFile), cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) };
  } catch {
    return undefined;
  }
}

async function probe(name: string, url: string, operator: ClientTls | undefined): Promise<ServiceStatus> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  if (url.startsWith("https:") && operator) {
    try {
      const { status, body } = await readyOverMtls(url, operator);
      return {
        name,
        url,
        ready: status === 200,
        state: status === 200 ? "ready" : "not_ready",
        version: body.version ?? null,
        ms: ms(),
      };
    } catch (err) {
      const cause = (err as { code?: string }).code ?? (err as Error).message;
      return { name, url, ready: false, state: "unreachable", version: null, ms: ms(), error: String(cause) };
    }
  }
  if (url.startsWith("https:")) {
    const { hostname, port } = new URL(url);
    const listening = await new Promise<string | undefined>((resolve) => {
      const socket = connect({ host: hostname.replace(/^\[|\]$/g, ""), port: Number(port || 443), timeout: 3000 });
      socket.once("connect", () => {
        socket.destroy();
        resolve(undefined);
      });
      socket.once("timeout", () => {
        socket.destroy();
        resolve("timed out");
      });
      socket.once("error", (err) => resolve(err.message));
    });
    return {
      name,
      url,
      ready: !listening,
      state: listening ? "unreachable" : "listening",
      version: null,
      ms: ms(),
      ...(listening ? { error: listening } : {}),
    };
  }
  try {
    const res = await fetch(new URL("/readyz", url), { signal: AbortSignal.timeout(3000) });
    const body = (await res.json().catch(() => ({}))) as { status?: string; version?: string };
    return {
      name,
      url,
      ready: res.status === 200,
      state: res.status === 200 ? "ready" : "not_ready",
      version: body.version ?? res.headers.get("x-platform-version"),
      ms: ms(),
    };
  } catch (err) {
    const cause = (err as Error & { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    return { name, url, ready: false, state: "unreachable", version: null, ms: ms(), error: String(cause) };
  }
}

function readyOverMtls(url: string, tls: ClientTls): Promise<{ status: number; body: { version?: string } }> {
  return new Promise((resolve, reject) => {
    const req = request(new URL("/readyz", url), { ...tls, timeout: 3000 }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        text += c;
      });
      res.on("end", () => {
        let body: { version?: string } = {};
        try {
          body = JSON.parse(text) as { version?: string };
        } catch {
          // Not our health answer: no version to show.
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", reject);
    req.end();
  });
}
