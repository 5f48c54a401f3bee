import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, before } from "node:test";
import { type PrivateCluster, postgresBinDir, startPrivateCluster } from "@platform/db/testing-pg-cluster";
import {
  agentsDbProblems,
  cgroupsLeft,
  execHelperDir,
  identityDbProblems,
  mountsLeft,
  processesUsing,
  SeenProcesses,
  sandboxNames,
  serviceDatabase,
} from "./checks.ts";
import { type SeenEvent, User } from "./client.ts";
import { FaultPlatform, progress, sleep } from "./harness.ts";

/**
 * One fault file's platform (launcher + services) with its owner and an agent
 * on the dev model, and the bookkeeping of the after-checks: every stream a
 * client received, the processes, sandboxes and exec helper directories seen.
 */
export class Fixture {
  platform!: FaultPlatform;
  owner!: User;
  agentId!: string;
  cluster?: PrivateCluster;
  databaseUrl?: string;
  /** Every stream a client received, by session: held against the stored logs. */
  readonly received = new Map<string, SeenEvent[][]>();
  readonly seen = new SeenProcesses();
  readonly execDirs = new Set<string>();
  readonly sandboxes = new Set<string>();

  streamsOf(session: string): SeenEvent[][] {
    return this.received.get(session) ?? this.received.set(session, []).get(session)!;
  }

  /** Takes note of the platform's processes, compute's exec helper directory and the sandbox directories. */
  remember(): void {
    this.seen.add(this.platform.processes());
    const compute = this.platform.servicePid("compute");
    const dir = compute ? execHelperDir(compute) : undefined;
    if (dir) this.execDirs.add(dir);
    for (const name of sandboxNames(this.platform.dataDir)) this.sandboxes.add(name);
  }

  /**
   * leftovers(), asked again for up to `ms` while anything is left: a
   * killed sandbox's processes may take a moment to be reaped on a loaded
   * machine; what is still there after it is reported.
   */
  async leftoversAfter(ms = 10_000): Promise<string[]> {
    const started = Date.now();
    const until = started + ms;
    let left = this.leftovers();
    const first = left.length;
    while (left.length > 0 && Date.now() < until) {
      await sleep(250);
      left = this.leftovers();
    }
    // Always said: how long the kernel took to reap killed sandboxes is what the next flaky run needs to know.
    if (first > 0)
      console.log(`# leftovers after the stop: ${first} at first, ${left.length} after ${Date.now() - started} ms`);
    // Whether compute finished its close or was killed at the launcher's grace, in its own words.
    if (left.length > 0)
      console.log(
        `# launcher, last lines:\n${this.platform.logs(30)}\n# compute's log, last lines:\n${tail(join(this.platform.dataDir, "logs", "compute.log"), 30)}`,
      );
    return left;
  }

  /** What a stopped platform must not leave behind: processes, cgroups, mounts and loop devices, exec helper directories. */
  leftovers(): string[] {
    const dataDir = this.platform.dataDir;
    return [
      ...this.seen.alive().map((p) => `process still running: ${p}`),
      ...processesUsing(dataDir).map((p) => `process using the data directory: ${p}`),
      ...cgroupsLeft(this.sandboxes).map((c) => `cgroup left: ${c}`),
      ...mountsLeft(dataDir),
      ...[...this.execDirs].filter(isDir).map((d) => `exec helper directory left: ${d}`),
    ];
  }

  /** The after-checks of the agents and identity databases (PGlite ones only while the platform is stopped). */
  async databaseProblems(): Promise<string[]> {
    const out: string[] = [];
    for (const service of ["agents", "identity"] as const) {
      const database = await serviceDatabase({
        databaseUrl: this.databaseUrl,
        dataDir: this.platform.dataDir,
        service,
      });
      try {
        out.push(...(service === "agents" ? await agentsDbProblems(database) : await identityDbProblems(database)));
      } finally {
        await database.close();
      }
    }
    return out;
  }

  /** Rejoins a session's stream after `after` until a terminal event or the deadline; every stream is kept. */
  async followToEnd(session: string, after: number, deadline: number): Promise<SeenEvent | undefined> {
    let last = after;
    while (Date.now() < deadline) {
      const s = await this.owner.follow(session, last, { timeoutMs: Math.max(1000, deadline - Date.now()) });
      this.streamsOf(session).push(s.events);
      last = s.events.at(-1)?.seq ?? last;
      if (s.end === "terminal") return s.events.at(-1);
      await sleep(500);
    }
    return undefined;
  }

  async start(db: "pglite" | "postgres"): Promise<void> {
    const started = Date.now();
    if (db === "postgres") {
      this.cluster = await startPrivateCluster();
      this.databaseUrl = await this.cluster.database("platform");
    }
    this.platform = await FaultPlatform.start({ databaseUrl: this.databaseUrl });
    this.owner = await User.login(this.platform.endpoints, this.platform.ownerEmail, this.platform.ownerPassword);
    this.agentId = await this.owner.agent();
    this.remember();
    progress(`platform on ${db} up in ${Date.now() - started} ms: ${this.platform.dataDir}`);
  }

  async destroy(): Promise<void> {
    await this.platform?.destroy();
    this.cluster?.destroy();
  }
}

/** Why a PostgreSQL file cannot run here, or false. */
export const noPostgres: string | false = postgresBinDir()
  ? false
  : "no PostgreSQL server binaries under /usr/lib/postgresql";

/** The file's fixture, started before its first test and destroyed after its last. */
export function useFixture(db: "pglite" | "postgres"): Fixture {
  const fixture = new Fixture();
  before(
    async () => {
      if (db === "postgres" && noPostgres) return;
      await fixture.start(db);
    },
    { timeout: 480_000 },
  );
  after(() => fixture.destroy());
  return fixture;
}

function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch (err) {
    return `(${(err as Error).message})`;
  }
}
