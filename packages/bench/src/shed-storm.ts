// `node --import tsx packages/bench/src/shed-storm.ts [rounds]`: the rpc
// server's cost of a refusal (ServerOptions.shed) under issue 15 item 4's
// storm of 2,000 concurrent logins, beside a bare node:http peer that answers
// 503 at once, measured alternately in the same run. Each server runs alone
// in a process of its own (no node:test harness, no database, no probes in
// it), so its CPU per request is the server's own: what a storm's last
// refusal waits for is one event loop doing every request's share. The rpc
// server is set up as identity's REST port (restOnly, CORS, 8 accept
// handles, info logging) and refuses every POST /v1/auth/login with
// identity's busy error; a kept-alive client probes /livez during the storm.
//
// The storm's clients: by default one process of login-storm-client.c (built
// with cc; 2,000 connections opened at once on one epoll loop, ~0.1 s of CPU
// for the whole storm), so the clients' p99 is the server's and the
// machine's, not the clients' own; SHED_STORM_CLIENT=node (or no cc) uses 4
// processes x 500 sockets of login-storm-client.mjs (~1 s of CPU each).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import http from "node:http";
import { fileURLToPath } from "node:url";
import { processCpuMs } from "./host/proc-cpu.ts";
import { buildStormClient, nativeStorm } from "../../identity/src/testing/login-storm-native.ts";

const PROCESSES = 4;
const LOGINS_PER_PROCESS = 500;
const STORM_CLIENT = fileURLToPath(new URL("../../identity/src/testing/login-storm-client.mjs", import.meta.url));

type Answer = { status: number; retryAfter?: string | null; ms: number };

/** The built C storm client, unless the storm is run with the Node clients. */
let native: string | undefined;

async function serve(kind: string): Promise<void> {
  if (kind === "peer") {
    const s = http.createServer((q, r) => {
      q.resume();
      q.on("end", () => {
        r.writeHead(503, { "retry-after": "1" });
        r.end("{}");
      });
    });
    s.listen(0, "127.0.0.1", 4096, () => console.log((s.address() as { port: number }).port));
    return;
  }
  const { createServer } = await import("@platform/rpc");
  const { pino, destination } = await import("pino");
  // identity's own refusal (PasswordHasher.busyError: 503 unavailable, Retry-After 1); bench has no @platform/errors.
  const { PlatformError } = await import("../../errors/src/index.ts");
  const busy = PlatformError.unavailable("too many password checks in progress; retry shortly", "unavailable", {
    retry_after: "1",
  });
  const server = createServer({
    name: "identity",
    envelope: (await import("../../identity/src/server/rest-envelope.ts")).identityEnvelope,
    services: [],
    restOnly: true,
    cors: { allowedOrigins: [] },
    acceptHandles: 8,
    shed: (req, path) => (req.method === "POST" && path === "/v1/auth/login" ? busy : undefined),
    // identity logs JSON lines at info; written where they cost the same and are not kept.
    logger: pino({ level: "info" }, destination({ dest: "/dev/null", sync: true })),
  });
  console.log((await server.listen()).port);
}

const pct = (v: number[], p: number) => {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? Number.NaN;
};

function stormProcess(port: number, prefix: string): Promise<Answer[]> {
  const config = JSON.stringify({
    url: `http://127.0.0.1:${port}`,
    count: LOGINS_PER_PROCESS,
    sockets: LOGINS_PER_PROCESS,
    prefix,
    password: "storm-password",
  });
  const child = spawn(process.execPath, [STORM_CLIENT, config], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  return new Promise((resolve, reject) =>
    child.on("close", (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`client exited ${code}`)))),
  );
}

async function round(kind: string): Promise<string> {
  // SHED_STORM_NODE_ARGS: more node flags for the servers, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const extra = (process.env.SHED_STORM_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const child = spawn(process.execPath, [...extra, "--import", "tsx", fileURLToPath(import.meta.url), "serve", kind], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    const port = await new Promise<number>((resolve) =>
      child.stdout.once("data", (d: Buffer) => resolve(Number(d.toString().trim()))),
    );
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const probe = () =>
      new Promise<number>((resolve, reject) => {
        const started = performance.now();
        http
          .get(`http://127.0.0.1:${port}/livez`, { agent }, (res) => {
            res.resume();
            res.on("end", () => resolve(performance.now() - started));
          })
          .on("error", reject);
      });
    await probe();
    let storming = true;
    const probes: number[] = [];
    const probing = (async () => {
      while (storming) {
        probes.push(await probe());
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const before = processCpuMs(child.pid!);
    const started = performance.now();
    let clientCpu = "";
    let answers: Answer[];
    if (native) {
      const storm = await nativeStorm(native, `http://127.0.0.1:${port}`, PROCESSES * LOGINS_PER_PROCESS, "n");
      answers = storm.answers;
      clientCpu = `; client CPU ${storm.cpuMs.toFixed(0)} ms`;
    } else {
      answers = (await Promise.all(Array.from({ length: PROCESSES }, (_, p) => stormProcess(port, `p${p}`)))).flat();
    }
    const stormMs = performance.now() - started;
    const used = processCpuMs(child.pid!) - before;
    storming = false;
    await probing;
    agent.destroy();
    const refused = answers.filter((a) => a.status === 503 && a.retryAfter);
    const ms = refused.map((a) => a.ms);
    const livez =
      kind === "peer"
        ? ""
        : ` /livez p50 ${pct(probes, 50).toFixed(0)} p99 ${pct(probes, 99).toFixed(0)} ms (${probes.length})`;
    return `${kind.padEnd(4)} ${refused.length}/${answers.length} refused in ${stormMs.toFixed(0)} ms: p50 ${pct(ms, 50).toFixed(0)} p99 ${pct(ms, 99).toFixed(0)} max ${Math.max(...ms).toFixed(0)} ms; server CPU ${used} ms = ${(used / answers.length).toFixed(3)} ms a request${clientCpu}${livez}`;
  } finally {
    child.kill("SIGINT");
    await new Promise((r) => child.once("exit", r));
  }
}

if (process.argv[2] === "serve") {
  // An orderly exit, so --cpu-prof writes its profile.
  process.once("SIGINT", () => process.exit(0));
  await serve(process.argv[3]!);
} else {
  native = process.env.SHED_STORM_CLIENT === "node" ? undefined : await buildStormClient();
  console.log(
    native
      ? "clients: one process of login-storm-client.c, 2,000 connections"
      : `clients: ${PROCESSES} processes x ${LOGINS_PER_PROCESS} sockets of login-storm-client.mjs`,
  );
  const rounds = Number(process.argv[2] ?? 3);
  for (let r = 1; r <= rounds; r++) {
    console.log(`round ${r} (load ${readFileSync("/proc/loadavg", "utf8").split(" ")[0]})`);
    for (const kind of ["peer", "rpc"]) console.log(`  ${await round(kind)}`);
  }
}
