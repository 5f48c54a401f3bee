import { connect } from "node:net";
import type { Context } from "./commands.ts";
import { CliError, type Endpoints, knownEndpoints } from "./endpoints.ts";

export type ServiceStatus = {
  name: string;
  url: string;
  /** Answered /readyz with 200 (an internal mTLS port: accepts connections). */
  ready: boolean;
  /** `ready`, `not_ready`, `unreachable`, or `listening` for an internal mTLS port (not probed over HTTP). */
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
};

/**
 * `platform status`: every endpoint platform.json or the environment names,
 * its /readyz and the version it reports. Exit status 1 unless all are
 * ready. An https endpoint is an internal mutual-TLS port, which answers only
 * the platform's own services: it is checked for a listener, not asked.
 */
export async function status(ctx: Context, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const { endpoints, path } = knownEndpoints(env);
  const named = (Object.keys(NAMES) as Array<keyof Endpoints>).filter((k) => endpoints[k]).map((k) => ({ name: NAMES[k], url: endpoints[k]! }));
  if (named.length === 0) {
    throw new CliError(`no endpoints: start the platform (bash scripts/run.sh) or set PLATFORM_IDENTITY_URL and the others (looked in ${path})`);
  }
  const results = await Promise.all(named.map((e) => probe(e.name, e.url)));
  const ok = results.every((r) => r.ready);
  if (ctx.io.json) {
    ctx.io.value({ ok, services: results });
  } else {
    for (const r of results) {
      const detail = r.error ? `  (${r.error})` : "";
      ctx.io.line(`${r.ready ? "✓" : "✗"} ${r.name.padEnd(15)} ${r.url.padEnd(28)} ${r.state.padEnd(11)} ${r.version ?? "-"}  ${r.ms} ms${detail}`);
    }
  }
  return ok;
}

async function probe(name: string, url: string): Promise<ServiceStatus> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
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
    return { name, url, ready: !listening, state: listening ? "unreachable" : "listening", version: null, ms: ms(), ...(listening ? { error: listening } : {}) };
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
