import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import * as https from "node:https";

/** One service process of the embedded shape. */
export type ServiceSpec = {
  name: string;
  /** TypeScript entry, run through tsx. */
  entry: string;
  env: Record<string, string>;
  /** URL answering 200 once the service is up (its /livez); an https one is asked with the launcher's client certificate. */
  readyUrl: string;
};

/** The client certificate the launcher presents to internal ports (the operator's) and the CA it trusts. */
export type ProbeTls = { ca: Buffer; cert: Buffer; key: Buffer };

/** Whether `url` answers 200: plain fetch for http, mutual TLS for https. */
export function probe(url: string, tls?: ProbeTls): Promise<boolean> {
  if (!url.startsWith("https:")) {
    return fetch(url)
      .then((r) => r.ok)
      .catch(() => false);
  }
  return new Promise((resolve) => {
    const req = https.get(url, { ...tls, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
  });
}

type Running = { spec: ServiceSpec; child: ChildProcess; exited: Promise<unknown> };

/**
 * Starts services in order, each once the previous one answers, and stops
 * them in reverse order: SIGTERM, then SIGKILL after the grace period. A
 * service that dies on its own takes the whole platform down, so a half-up
 * platform never keeps running unnoticed.
 */
export class Supervisor {
  readonly #running: Running[] = [];
  #stopping = false;

  constructor(
    private readonly log: (line: string) => void,
    private readonly onUnexpectedExit: (name: string, code: number | null) => void,
    private readonly probeTls?: ProbeTls,
  ) {}

  async start(spec: ServiceSpec, timeoutMs = Number(process.env.PLATFORM_START_TIMEOUT_MS ?? 180_000)): Promise<void> {
    const child = spawn(process.execPath, ["--import", "tsx", spec.entry], {
      env: { ...process.env, ...spec.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const prefix = (chunk: Buffer) =>
      chunk
        .toString()
        .split("\n")
        .filter((l) => l.trim())
        .map((l) => `[${spec.name}] ${l}`)
        .join("\n");
    child.stdout?.on("data", (c: Buffer) => process.env.PLATFORM_VERBOSE && this.log(prefix(c)));
    child.stderr?.on("data", (c: Buffer) => this.log(prefix(c)));
    const exited = once(child, "exit");
    this.#running.push({ spec, child, exited });
    child.on("exit", (code) => {
      if (!this.#stopping) this.onUnexpectedExit(spec.name, code);
    });
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`${spec.name} exited with code ${child.exitCode} during start-up`);
      if (await probe(spec.readyUrl, this.probeTls)) return;
      await new Promise((r) => setTimeout(r, 150));
    }
    throw new Error(`${spec.name} did not answer ${spec.readyUrl} within ${timeoutMs / 1000} s`);
  }

  async stopAll(graceMs = 10_000): Promise<void> {
    this.#stopping = true;
    for (const { child, exited } of [...this.#running].reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    }
  }
}
