import { existsSync, readFileSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { type Database, openDatabase } from "@platform/db";
import { sql } from "kysely";
import { startTime } from "../testing/process-group.ts";
import { cmdline } from "./harness.ts";

export { startTime };

// After-checks of the fault suite: what a platform run must not leave behind,
// read from outside (/proc, /sys, the data directory, the services' databases).

/** Processes whose command line names the data directory (services, sandboxes, exec helpers), but not `except`. */
export function processesUsing(dataDir: string, except: readonly number[] = []): string[] {
  const found: string[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || except.includes(Number(name))) continue;
    const cmd = cmdline(Number(name));
    if (cmd.includes(dataDir)) found.push(`${name} ${cmd.slice(0, 200)}`);
  }
  return found;
}

/** Processes seen once (pid and start time), to ask later which of them still live. */
export class SeenProcesses {
  readonly #seen = new Map<number, { start: string; what: string }>();
  add(pids: Iterable<number>): void {
    for (const pid of pids) {
      const start = startTime(pid);
      if (start && !this.#seen.has(pid)) this.#seen.set(pid, { start, what: cmdline(pid).slice(0, 160) });
    }
  }
  get size(): number {
    return this.#seen.size;
  }
  /** The ones still there, with their state and parent (a zombie waits for its reaper; a T/frozen one for a thaw). */
  alive(): string[] {
    return [...this.#seen]
      .filter(([pid, p]) => startTime(pid) === p.start)
      .map(([pid, p]) => `${pid} [${processState(pid)}] ${p.what}`);
  }
}

/** `state S, ppid N, freezer F` of a process, for a leftover's report. */
function processState(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const freezer = readFileSync(`/proc/${pid}/cgroup`, "utf8")
      .split("\n")
      .find((l) => l.includes(":freezer:"))
      ?.split(":")[2];
    let frozen = "";
    try {
      if (freezer) frozen = readFileSync(join("/sys/fs/cgroup/freezer", freezer, "freezer.state"), "utf8").trim();
    } catch {
      // no v1 freezer
    }
    return `state ${state}, ppid ${ppid}${frozen ? `, freezer ${frozen}` : ""}`;
  } catch {
    return "gone";
  }
}

/** Sandbox names (ids, and the `.warm-` ones started ahead) compute has made under the data directory so far. */
export function sandboxNames(dataDir: string): string[] {
  try {
    return readdirSync(join(dataDir, "compute", "sandboxes"));
  } catch {
    return [];
  }
}

/** Cgroup directories compute makes for `names` (v2 and each v1 controller, under this process's own cgroup as compute does) that exist now. */
export function cgroupsLeft(names: Iterable<string>, prefix = "platform-compute"): string[] {
  const mount = "/sys/fs/cgroup";
  const bases: string[] = [];
  if (existsSync(join(mount, "cgroup.controllers"))) bases.push(join(mount, prefix));
  else {
    const own = new Map<string, string>();
    for (const line of readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
      const [, controllers, path] = line.split(":");
      if (controllers && path !== undefined) for (const c of controllers.split(",")) own.set(c, path);
    }
    for (const c of ["cpu", "cpuacct", "memory", "pids", "blkio", "freezer"]) {
      if (!existsSync(join(mount, c))) continue;
      bases.push(join(realpathSync(join(mount, c)), own.get(c) ?? "/", prefix));
    }
  }
  const left: string[] = [];
  for (const name of names) for (const base of bases) if (existsSync(join(base, name))) left.push(join(base, name));
  return [...new Set(left)];
}

/** Mount points and loop devices that hold something under the data directory (workspace images). */
export function mountsLeft(dataDir: string): string[] {
  const left: string[] = [];
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n"))
    if (line.includes(dataDir)) left.push(`mount: ${line}`);
  let loops: string[] = [];
  try {
    loops = readdirSync("/sys/block").filter((d) => d.startsWith("loop"));
  } catch {}
  for (const loop of loops) {
    let backing = "";
    try {
      backing = readFileSync(`/sys/block/${loop}/loop/backing_file`, "utf8").trim();
    } catch {
      continue;
    }
    if (backing.startsWith(dataDir)) left.push(`/dev/${loop} -> ${backing}${holdersOf(`/dev/${loop}`)}`);
  }
  return left;
}

/**
 * Who still has `device` mounted in a mount namespace of theirs (a loop
 * device left after a stop detaches itself once the last one goes): for the
 * report of a flaky run, not a check of its own.
 */
function holdersOf(device: string): string {
  const holders: string[] = [];
  let pids: string[] = [];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {}
  let ours = "";
  try {
    ours = readlinkSync("/proc/self/ns/mnt");
  } catch {}
  for (const pid of pids) {
    try {
      // This namespace's own mounts are listed as mounts already.
      if (readlinkSync(`/proc/${pid}/ns/mnt`) === ours) continue;
      if (!readFileSync(`/proc/${pid}/mountinfo`, "utf8").includes(` ${device} `)) continue;
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim().slice(0, 120);
      holders.push(`${pid} ${cmd}`);
    } catch {}
  }
  return holders.length > 0
    ? ` (mounted in the namespaces of: ${holders.slice(0, 5).join("; ")})`
    : " (in no other mount namespace)";
}

/**
 * The directory of compute's exec helper socket (/tmp/platform-compute-exec-*)
 * that process `pid` listens on, found through /proc/net/unix and its file
 * descriptors; undefined when it has none.
 */
export function execHelperDir(pid: number): string | undefined {
  const inodes = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.add(m[1]!);
      } catch {}
    }
  } catch {
    return undefined;
  }
  for (const line of readFileSync("/proc/net/unix", "utf8").split("\n").slice(1)) {
    const cols = line.trim().split(/\s+/);
    const path = cols[7];
    if (path?.includes("platform-compute-exec-") && inodes.has(cols[6]!)) return path.slice(0, path.lastIndexOf("/"));
  }
  return undefined;
}

function hasDeleteAfter(dir: string): boolean {
  try {
    const annotations = JSON.parse(readFileSync(join(dir, "annotations.json"), "utf8")) as Record<string, string>;
    return Object.keys(annotations).some((k) => k.endsWith("delete-after"));
  } catch {
    return false;
  }
}

/**
 * The directories holding a session's workspace: its sandbox's directory
 * (one workspace per sandbox) and/or `workspaces/<tenant>_<session>` (one
 * workspace per session, outliving its sandboxes), whichever exist.
 */
export function workspaceDirsOf(dataDir: string, ids: { sandboxId?: string; sessionId: string }): string[] {
  const dirs: string[] = [];
  if (ids.sandboxId) dirs.push(join(dataDir, "compute", "sandboxes", ids.sandboxId));
  try {
    for (const name of readdirSync(join(dataDir, "compute", "workspaces")))
      if (name.endsWith(`_${ids.sessionId}`)) dirs.push(join(dataDir, "compute", "workspaces", name));
  } catch {}
  return dirs.filter((d) => existsSync(d));
}

/** Of `dirs`, those without a delete-after mark. */
export function withoutDeleteAfter(dirs: string[]): string[] {
  return dirs.filter((d) => !hasDeleteAfter(d));
}

/**
 * Sandbox and workspace directories under compute's data directory that no
 * session can reach and that are not marked for collection: neither a
 * delete-after mark, nor a live sandbox (its recorded init process still
 * running), nor an image attached to a loop device (mounted for a sandbox).
 */
export function unmarkedWorkspaces(dataDir: string): string[] {
  const attached = mountsLeft(dataDir).join("\n");
  const out: string[] = [];
  for (const under of ["sandboxes", "workspaces"]) {
    let names: string[] = [];
    try {
      names = readdirSync(join(dataDir, "compute", under)).filter((n) => !n.startsWith("."));
    } catch {
      continue;
    }
    for (const name of names) {
      const dir = join(dataDir, "compute", under, name);
      if (hasDeleteAfter(dir) || attached.includes(`${dir}/`)) continue;
      let live = false;
      try {
        const state = JSON.parse(readFileSync(join(dir, "state.json"), "utf8")) as {
          initPid?: number;
          initStartTime?: string;
        };
        live = state.initPid !== undefined && startTime(state.initPid) === state.initStartTime;
      } catch {}
      if (!live) out.push(dir);
    }
  }
  return out;
}

/**
 * What a failure report needs about directories the checks flagged: each
 * one's files, its state and annotations, and every line of the services'
 * logs (the data directory's logs/) that names it.
 */
export function describeDirs(dataDir: string, dirs: string[]): string {
  const logs: string[] = [];
  try {
    for (const name of readdirSync(join(dataDir, "logs")))
      logs.push(
        ...readFileSync(join(dataDir, "logs", name), "utf8")
          .split("\n")
          .map((l) => `${name}: ${l}`),
      );
  } catch {}
  return dirs
    .map((dir) => {
      const id = dir.slice(dir.lastIndexOf("/") + 1);
      const files = (() => {
        try {
          return readdirSync(dir).join(" ");
        } catch (err) {
          return String(err);
        }
      })();
      const json = ["state.json", "annotations.json", "owner.json", "usage.json"].map((f) => {
        try {
          return `${f} ${readFileSync(join(dir, f), "utf8").trim()}`;
        } catch {
          return `${f} -`;
        }
      });
      const lines = logs.filter((l) => l.includes(id) || l.includes(id.split("_").pop() as string)).slice(-40);
      return `${dir}\n  files: ${files}\n  ${json.join("\n  ")}\n  log:\n    ${lines.join("\n    ")}`;
    })
    .join("\n");
}

/** Opens a service's database: the shared PostgreSQL one, or its PGlite directory (only while the service is stopped). */
export function serviceDatabase(options: {
  databaseUrl?: string;
  dataDir: string;
  service: "identity" | "agents";
}): Promise<Database<unknown>> {
  if (options.databaseUrl) return openDatabase({ url: options.databaseUrl, maxConnections: 2, minConnections: 0 });
  return openDatabase({ dataDir: join(options.dataDir, options.service) });
}

async function rows(database: Database<unknown>, text: string): Promise<Array<Record<string, unknown>>> {
  return (await sql.raw<Record<string, unknown>>(text).execute(database.db)).rows;
}

/** Runs without a terminal event and sessions still held by a run, in the agents database. */
export async function agentsDbProblems(database: Database<unknown>): Promise<string[]> {
  const problems: string[] = [];
  const open = await rows(
    database,
    `select e.session_id::text as session, e.run_id::text as run from session_events e where e.run_id is not null
     group by e.session_id, e.run_id having count(*) filter (where e.type in ('done', 'error', 'requires_action')) = 0`,
  );
  for (const r of open)
    problems.push(`run ${r.run} of session ${r.session} has no done, error or requires_action event`);
  const held = await rows(
    database,
    "select id::text as id, active_run_id::text as run from sessions where active_run_id is not null",
  );
  for (const r of held) problems.push(`session ${r.id} is still held by run ${r.run}`);
  const gaps = await rows(
    database,
    `select s.id::text as id, s.last_seq, count(e.seq) as n, coalesce(max(e.seq), 0) as max from sessions s left join session_events e on e.session_id = s.id
     group by s.id, s.last_seq having count(e.seq) <> coalesce(max(e.seq), 0) or coalesce(max(e.seq), 0) <> s.last_seq`,
  );
  for (const r of gaps)
    problems.push(
      `session ${r.id}: last_seq ${r.last_seq}, ${r.n} events, highest seq ${r.max} (a gap or a lost tail)`,
    );
  return problems;
}

/**
 * Idempotency records held running beyond any claim's lock, done ones
 * without a stored answer, and refresh-token families in an impossible state
 * (more than one usable token, or a usable token in a revoked family).
 */
export async function identityDbProblems(database: Database<unknown>): Promise<string[]> {
  const problems: string[] = [];
  const stuck = await rows(
    database,
    // A claim holds its key for twice the request deadline (identity's idempotencyLockMs, 60 s), so a
    // request cut by a kill keeps its record running until then and a retry after it takes over;
    // a record locked further ahead than that is held beyond any claim. (The bound was 35 s, which
    // flagged claims of the identity churn made less than 25 s before the check.)
    "select scope, key from idempotency_keys where state = 'running' and locked_until > now() + interval '65 seconds'",
  );
  for (const r of stuck)
    problems.push(`idempotency record ${r.scope}/${r.key} is held running beyond any claim's lock`);
  const empty = await rows(
    database,
    "select scope, key from idempotency_keys where state = 'done' and response is null",
  );
  for (const r of empty) problems.push(`idempotency record ${r.scope}/${r.key} is done without an answer`);
  const families = await rows(
    database,
    `select f.id::text as id, f.revoked_at is not null as revoked, count(t.id) filter (where t.consumed_at is null and t.revoked_at is null and t.expires_at > now()) as usable
     from refresh_token_families f left join refresh_tokens t on t.family_id = f.id group by f.id, f.revoked_at`,
  );
  for (const f of families) {
    const usable = Number(f.usable);
    if (usable > 1) problems.push(`refresh family ${f.id} has ${usable} usable tokens`);
    if (f.revoked && usable > 0) problems.push(`refresh family ${f.id} is revoked but has a usable token`);
  }
  return problems;
}
