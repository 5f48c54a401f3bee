// CPU of `platform files upload|download` per process: starts the platform,
// then moves a file of FILES_BENCH_MIB (default 256) up and down ROUNDS times
// with the real CLI, printing each process's CPU seconds (user+system, from
// /proc) and the MiB/s of each transfer. FILES_BENCH_PROF=<dir> writes CPU
// profiles of the services and the CLI there.
// Run: node --import tsx packages/platform/src/testing/files-bench.ts
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { OWNER, startPlatform } from "./platform-stack.ts";

const MIB = Number(process.env.FILES_BENCH_MIB ?? "256");
const ROUNDS = Number(process.env.FILES_BENCH_ROUNDS ?? "1");
const PROF = process.env.FILES_BENCH_PROF;
const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;
const TICK = 100; // USER_HZ

const prof = (name: string) => (PROF ? ["--cpu-prof", `--cpu-prof-dir=${join(PROF, name)}`] : []);
const stack = await startPlatform({
  nodeArgs: PROF
    ? { agents: prof("agents"), compute: prof("compute"), identity: prof("identity") }
    : JSON.parse(process.env.FILES_BENCH_ARGS ?? "{}"),
});

function cpuOf(pid: number): { user: number; sys: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { user: Number(f[11]) / TICK, sys: Number(f[12]) / TICK }; // utime, stime (fields 14, 15)
}

function services(): Record<string, { user: number; sys: number }> {
  const out: Record<string, { user: number; sys: number }> = {};
  const kids = readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, "utf8").trim().split(/\s+/);
  for (const k of kids) {
    const cmd = readFileSync(`/proc/${k}/cmdline`, "utf8");
    const m = /bundles?[^\0]*?\/(identity|compute|agents|runtime)[^\0/]*\.m?js/.exec(cmd);
    if (m) out[m[1] as string] = cpuOf(Number(k));
  }
  return out;
}

function cli(args: string[], extra: string[] = []): Promise<{ out: string; cpu: number; sys: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/bin/time", ["-f", "%U %S", process.execPath, ...extra, bin, ...args], {
      env: stack.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => (out += c));
    child.stderr.on("data", (c: Buffer) => (err += c));
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`${args.join(" ")}: ${code}\n${out}\n${err}`));
      const [u, s] = err.trim().split("\n").at(-1)!.split(" ").map(Number);
      resolve({ out, cpu: (u ?? 0) + (s ?? 0), sys: s ?? 0 });
    });
  });
}

try {
  const loginEnv = { ...stack.env, PLATFORM_PASSWORD: OWNER.password };
  await new Promise<void>((resolve) =>
    spawn(process.execPath, [bin, "login", "--email", OWNER.email], { env: loginEnv, stdio: "ignore" }).on(
      "close",
      () => resolve(),
    ),
  );
  const login = await fetch(`${stack.endpoints.identity}/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(OWNER),
  });
  const token = ((await login.json()) as { access_token: string }).access_token;
  const api = async (path: string, body: unknown) =>
    (await (
      await fetch(`${stack.endpoints.agents}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      })
    ).json()) as { id: string };
  const agent = (await api("/v1/agents", { name: "Bench", slug: "bench", model: "dev/echo" })).id;
  const session = (await api("/v1/sessions", { agentId: agent })).id;
  const work = join(stack.dataDir, "bench");
  mkdirSync(work);
  const file = join(work, "big.bin");
  const block = Buffer.alloc(4 << 20, 7);
  const fd = openSync(file, "w");
  for (let off = 0; off < MIB; off += 4) {
    block.writeUInt32BE(off);
    writeSync(fd, block);
  }
  closeSync(fd);
  // A first small call makes the session's sandbox: not part of the figures.
  await cli(["files", "ls", session]);
  for (let round = 0; round < ROUNDS; round++) {
    for (const way of ["upload", "download"] as const) {
      if (round > 0 && process.env.FILES_BENCH_WAYS === "upload" && way === "download") continue;
      const marks = () =>
        process.env.H82_LOG_DIR
          ? ["agents", "compute"].map(
              (n) => readFileSync(`${process.env.H82_LOG_DIR}/${n}.log`, "utf8").split("Mark-Compact").length - 1,
            )
          : [];
      const marksBefore = marks();
      const before = services();
      const args =
        way === "upload"
          ? ["files", "upload", session, file, "big.bin", "--json"]
          : ["files", "download", session, "big.bin", join(work, "copy.bin"), "--json"];
      const t0 = process.hrtime.bigint() / 1000n;
      const r = await cli(args, PROF ? prof("cli") : []);
      if (PROF) console.log(`window ${way} ${t0} ${process.hrtime.bigint() / 1000n}`);
      const after = services();
      const seconds = (JSON.parse(r.out) as { seconds: number }).seconds;
      let total = r.cpu;
      const per = Object.keys(after).map((k) => {
        const user = after[k]!.user - (before[k]?.user ?? 0);
        const sys = after[k]!.sys - (before[k]?.sys ?? 0);
        total += user + sys;
        return `${k} ${(user + sys).toFixed(2)} (sys ${sys.toFixed(2)})`;
      });
      console.log(
        `${way} ${MIB} MiB: ${(MIB / seconds).toFixed(1)} MiB/s, CPU total ${total.toFixed(2)} s: cli ${r.cpu.toFixed(2)} (sys ${r.sys.toFixed(2)}), ${per.join(", ")}; load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`,
      );
      if (process.env.H82_LOG_DIR)
        console.log(`mark-compacts agents/compute: ${marks().map((n, i) => n - (marksBefore[i] ?? 0))}`);
      if (way === "download") rmSync(join(work, "copy.bin"));
    }
  }
} finally {
  await stack.stop();
}
