import { readFileSync } from "node:fs";
// The launcher harness of the platform's fault suite: the real `bash scripts/run.sh` shape (launcher + four
// services as processes, embedded PGlite under a throw-away data directory), reached by path as the bench
// reaches the runtime's internals.
import { User } from "../../../platform/src/faults/client.ts";
import { FaultPlatform, SERVICE_ENTRIES, type ServiceName } from "../../../platform/src/faults/harness.ts";
import type { Figure } from "../figure.ts";

const MiB = 2 ** 20;
const GOAL_BYTES = 2 ** 30;
const SERVICES = Object.keys(SERVICE_ENTRIES) as ServiceName[];

/** One process's memory as the kernel counts it (bytes). `wasm`: resident pages of its WebAssembly memories. */
export type ProcessMemory = { rss: number; pss: number; anon: number; wasm: number };

/**
 * /proc/<pid>/smaps_rollup's Rss, Pss and Anonymous, and the resident part of
 * the process's WebAssembly memories, told apart in /proc/<pid>/smaps: V8
 * reserves each one with a guard region of gigabytes behind it, so a
 * read-write anonymous mapping directly followed by an inaccessible one of
 * ≥ 1 GiB is a WASM memory (PGlite's). Undefined when the process is gone.
 */
export function processMemory(pid: number): ProcessMemory | undefined {
  let rollup: string;
  let smaps: string;
  try {
    rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    smaps = readFileSync(`/proc/${pid}/smaps`, "utf8");
  } catch {
    return undefined;
  }
  const kib = (text: string, field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? 0);
  type Mapping = { start: bigint; end: bigint; perms: string; path: string; rss: number };
  const mappings: Mapping[] = [];
  for (const block of smaps.split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
    const [range = "", perms = "", , , , path = ""] = (block.split("\n")[0] ?? "").split(/\s+/);
    const [start, end] = range.split("-").map((x) => BigInt(`0x${x || "0"}`));
    mappings.push({ start: start ?? 0n, end: end ?? 0n, perms, path, rss: kib(block, "Rss") });
  }
  let wasm = 0;
  for (let i = 0; i + 1 < mappings.length; i++) {
    const m = mappings[i]!;
    const next = mappings[i + 1]!;
    if (m.path === "" && m.perms.startsWith("rw") && next.start === m.end && next.perms.startsWith("---"))
      if (next.end - next.start >= 1n << 30n) wasm += m.rss;
  }
  return {
    rss: kib(rollup, "Rss") * 1024,
    pss: kib(rollup, "Pss") * 1024,
    anon: kib(rollup, "Anonymous") * 1024,
    wasm: wasm * 1024,
  };
}

/** A service's memory: its own process, and everything below it (tsx's esbuild, sandboxes, tenant workers). */
export type ServiceMemory = { pid: number; self: ProcessMemory; children: { count: number; rss: number; pss: number } };

export type Footprint = {
  total: { rss: number; pss: number };
  launcher: { rss: number; pss: number };
  services: Record<string, ServiceMemory>;
};

/** The footprint of every process of the platform now: the launcher's tree, summed per service. */
export function footprint(platform: FaultPlatform): Footprint {
  const launcherPid = platform.launcherPid;
  if (!launcherPid) throw new Error("the platform is not running");
  const all = new Set(platform.processes());
  const services: Record<string, ServiceMemory> = {};
  const owned = new Set<number>();
  for (const name of SERVICES) {
    const pid = platform.servicePid(name);
    if (!pid) throw new Error(`${name} is not running`);
    const self = processMemory(pid);
    if (!self) throw new Error(`${name} (pid ${pid}) is gone`);
    const children = { count: 0, rss: 0, pss: 0 };
    for (const child of subtree(pid, all)) {
      owned.add(child);
      if (child === pid) continue;
      const m = processMemory(child);
      if (!m) continue;
      children.count++;
      children.rss += m.rss;
      children.pss += m.pss;
    }
    services[name] = { pid, self, children };
  }
  // The launcher and its own children (its tsx esbuild): what no service owns.
  const launcher = { rss: 0, pss: 0 };
  for (const pid of all) {
    if (owned.has(pid)) continue;
    const m = processMemory(pid);
    if (!m) continue;
    launcher.rss += m.rss;
    launcher.pss += m.pss;
  }
  const total = { rss: launcher.rss, pss: launcher.pss };
  for (const s of Object.values(services)) {
    total.rss += s.self.rss + s.children.rss;
    total.pss += s.self.pss + s.children.pss;
  }
  return { total, launcher, services };
}

/** `pid` and its descendants among `all` (read from /proc/<pid>/stat). */
function subtree(pid: number, all: Set<number>): number[] {
  const parent = new Map<number, number>();
  for (const p of all) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      parent.set(p, Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {}
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [p, pp] of parent) if (pp === out[i]) out.push(p);
  return out;
}

const mib = (bytes: number) => `${Math.round(bytes / MiB)}`;

/** "identity 310 (PSS 280, WASM 40; +2 processes 15)" for each service, the launcher last. */
function perService(f: Footprint): string {
  const parts = SERVICES.map((name) => {
    const s = f.services[name]!;
    const kids = s.children.count > 0 ? `; +${s.children.count} below it ${mib(s.children.rss)}` : "";
    const wasm = s.self.wasm > 0 ? `, WASM ${mib(s.self.wasm)}` : "";
    return `${name} ${mib(s.self.rss)} (PSS ${mib(s.self.pss)}${wasm}${kids})`;
  });
  return `${parts.join(", ")}, launcher ${mib(f.launcher.rss)} (PSS ${mib(f.launcher.pss)})`;
}

/** The numbers kept in raw: MiB, rounded, per service. */
function rawOf(f: Footprint) {
  return {
    totalRssMiB: Math.round(f.total.rss / MiB),
    totalPssMiB: Math.round(f.total.pss / MiB),
    launcher: { rssMiB: Math.round(f.launcher.rss / MiB), pssMiB: Math.round(f.launcher.pss / MiB) },
    services: Object.fromEntries(
      Object.entries(f.services).map(([name, s]) => [
        name,
        {
          rssMiB: Math.round(s.self.rss / MiB),
          pssMiB: Math.round(s.self.pss / MiB),
          wasmMiB: Math.round(s.self.wasm / MiB),
          below: s.children.count,
          belowRssMiB: Math.round(s.children.rss / MiB),
          belowPssMiB: Math.round(s.children.pss / MiB),
        },
      ]),
    ),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The load: `users` clients at once, each signs in, makes an agent on the dev
 * model and a session, and runs `turns` turns that execute a command in the
 * session's sandbox (`run: echo …`: agents → compute → a bwrap sandbox).
 */
async function load(platform: FaultPlatform, users: number, turns: number): Promise<void> {
  await Promise.all(
    Array.from({ length: users }, async () => {
      const user = await User.login(platform.endpoints, platform.ownerEmail, platform.ownerPassword);
      const session = await user.session(await user.agent("dev/echo"));
      for (let i = 0; i < turns; i++) {
        const turn = await user.send(session, `run: echo footprint ${i}`);
        if (turn.end !== "terminal" || !turn.events.some((e) => e.type === "done"))
          throw new Error(`turn ${i}: ${turn.end} ${turn.status} ${JSON.stringify(turn.events.slice(-2))}`);
      }
    }),
  );
}

/**
 * The whole one-command platform's memory: every process the launcher runs
 * (itself, identity, compute, agents, the runtime router and what each starts),
 * RSS and PSS (shared pages counted once), with an empty database just after a
 * first start, again after a restart on that data directory (full run), and
 * after a stated load.
 */
export const platformFootprint: Figure = {
  id: "platform-footprint",
  title: "one-command platform footprint (embedded PGlite, idle and loaded)",
  goal: "total idle RSS ≤ 1 GiB with an empty database",
  fullTimeoutMs: 20 * 60_000,
  // The whole platform starts on a fresh data directory (three PGlite initdbs): a minute or more on a loaded machine.
  quickTimeoutMs: 300_000,
  async run(_stack, size) {
    const settleMs = size === "quick" ? 3000 : 10_000;
    const users = size === "quick" ? 1 : 4;
    const rounds = size === "quick" ? 1 : 3;
    const turns = size === "quick" ? 1 : 3;
    const platform = await FaultPlatform.start({
      // A first start makes three clusters: minutes on a loaded machine, beyond the launcher's 180 s default.
      env: { PLATFORM_LOG_LEVEL: "warn", PLATFORM_START_TIMEOUT_MS: "900000" },
      // Toy size: the harness copies a new cluster into each service's directory (the one the platform's
      // tests share, made once per machine) instead of three initdbs (minutes on a loaded machine).
      firstStart: size === "full",
    });
    try {
      await sleep(settleMs);
      const first = footprint(platform);
      let restart: Footprint | undefined;
      if (size === "full") {
        const code = await platform.stop();
        if (code === "timeout") throw new Error("the platform did not stop within 60 s");
        await platform.launch();
        await sleep(settleMs);
        restart = footprint(platform);
      }
      const started = Date.now();
      for (let r = 0; r < rounds; r++) await load(platform, users, turns);
      const loadSeconds = (Date.now() - started) / 1000;
      await sleep(settleMs);
      const loaded = footprint(platform);
      const idle = restart ? (restart.total.rss > first.total.rss ? restart : first) : first;
      const met = idle.total.rss <= GOAL_BYTES;
      const loadText = `${rounds} round${rounds > 1 ? "s" : ""} of ${users} client${users > 1 ? "s" : ""} at once, each: sign in, create an agent (dev/echo) and a session, ${turns} turn${turns > 1 ? "s" : ""} running \`echo\` in the session's sandbox (${loadSeconds.toFixed(1)} s)`;
      return {
        baseline: `goal ${mib(GOAL_BYTES)} MiB`,
        measured: `idle ${mib(idle.total.rss)} MiB RSS (PSS ${mib(idle.total.pss)}); loaded ${mib(loaded.total.rss)} MiB RSS (PSS ${mib(loaded.total.pss)})`,
        ratio: `${(idle.total.rss / GOAL_BYTES).toFixed(2)}× the goal`,
        met,
        notes: [
          `Every process of \`bash scripts/run.sh\` (launcher, identity, compute, agents, runtime router, and what each starts: sandboxes, tenant workers, tsx's esbuild where a process runs through tsx), embedded PGlite in a fresh data directory${size === "quick" ? " (toy size: each service's empty cluster copied in, not made by a first start)" : ""}; MiB.`,
          `First start, empty database, ${settleMs / 1000} s after up: ${mib(first.total.rss)} RSS, PSS ${mib(first.total.pss)}: ${perService(first)}.`,
          ...(restart
            ? [
                `Restarted on the same data directory: ${mib(restart.total.rss)} RSS, PSS ${mib(restart.total.pss)}: ${perService(restart)}.`,
              ]
            : []),
          `After the load (${loadText}), ${settleMs / 1000} s later: ${mib(loaded.total.rss)} RSS, PSS ${mib(loaded.total.pss)}: ${perService(loaded)}.`,
          `The goal is held against the larger idle total${restart ? " (first start or restart)" : ""}.`,
        ].join(" "),
        raw: {
          first: rawOf(first),
          ...(restart ? { restart: rawOf(restart) } : {}),
          loaded: rawOf(loaded),
          load: { users, rounds, turns, seconds: loadSeconds },
        },
      };
    } finally {
      await platform.destroy();
    }
  },
};
