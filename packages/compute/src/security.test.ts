// Security suite of the compute service (issue: ≥ 100,000 generated hostile
// paths and symlink layouts across Read/Write/List with 0 escapes, plus
// isolation checks inside real sandboxes).
//
// Part 1 runs the exact code path of ReadFile/WriteFile/ListFiles (path rule 1
// in cleanWorkspacePath, rules 2 in WorkspaceFs) in-process against real
// directories with hostile symlinks, so it is fast. The oracle does not trust
// the implementation: secrets outside the workspace have unique contents and
// names that must never come back, and after every layout the whole area
// outside the workspace is scanned for anything a write may have created.
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Worker } from "node:worker_threads";
import { Code, PlatformError } from "@platform/errors";
import { LocalDriver } from "./drivers/local/local-driver.ts";
import { workspaceImageOf } from "./drivers/local/session-workspace.ts";
import { WorkspaceFs } from "./drivers/local/workspace-fs.ts";
import { MOUNTS_ROOT, WorkspaceImage } from "./drivers/local/workspace-image.ts";
import { cleanWorkspacePath } from "./paths.ts";
import { collectExec, contractSpec } from "./testing/driver-contract.ts";

const MOUNT = "/workspace";
const SECRET = `SECRET-${randomBytes(8).toString("hex")}`;
const SECRET_NAME = `secretname_${randomBytes(4).toString("hex")}`;
const WRITE_MARK = `WMARK-${randomBytes(6).toString("hex")}`;

/** Tiny deterministic PRNG so a failure can be replayed from its seed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Layout {
  root: string;
  ws: string;
  outside: string;
  names: string[];
}

/** Workspace with a random tree of dirs, files and hostile/benign symlinks; secrets beside it. */
function makeLayout(base: string, rand: () => number): Layout {
  const root = fs.mkdtempSync(join(base, "layout-"));
  const ws = join(root, "ws");
  const outside = join(root, "outside");
  fs.mkdirSync(join(outside, "deep"), { recursive: true });
  fs.mkdirSync(join(root, ROOT_ONLY));
  fs.mkdirSync(ws);
  for (const p of [join(outside, SECRET_NAME), join(outside, "deep", SECRET_NAME), join(root, SECRET_NAME)]) {
    fs.writeFileSync(p, SECRET);
  }
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const dirs = [""];
  const names = ["a", "b", "c", "d", "l1", "l2", "l3", "l4", "f"];
  for (let i = 0; i < 8; i++) {
    const d = join(pick(dirs), pick(["a", "b", "c", "d"]));
    fs.mkdirSync(join(ws, d), { recursive: true });
    dirs.push(d);
  }
  for (const d of dirs) fs.writeFileSync(join(ws, d, "f"), `inside:${d}`);
  const hostileTargets = [
    "/",
    "/etc",
    "/etc/passwd",
    outside,
    join(outside, SECRET_NAME),
    root,
    "..",
    "../..",
    "../../..",
    "../outside",
    `../outside/${SECRET_NAME}`,
    "../../outside",
    `${MOUNT}/..`,
    `${MOUNT}/../..`,
    `${MOUNT}/../${SECRET_NAME}`,
    `${MOUNT}x`,
    `${MOUNT}x/a`,
    "/proc/self/root",
    "/proc/self/cwd",
    `/proc/${process.pid}/root`,
    "a/../../..",
    "./../.",
    "l1",
    "l2",
    "../l1",
    "//workspace/../..",
    `${root.slice(1)}/outside`, // relative spelling of an absolute host path
  ];
  const benignTargets = [
    ".",
    "a",
    "b/c",
    `${MOUNT}/a`,
    `${MOUNT}`,
    "f",
    `${MOUNT}/f`,
    "../a",
    "l3",
    "nonexistent",
    `${MOUNT}/new`,
  ];
  for (const d of dirs) {
    for (const ln of ["l1", "l2", "l3", "l4"]) {
      if (rand() < 0.6) {
        const target = rand() < 0.55 ? pick(hostileTargets) : pick(benignTargets);
        try {
          fs.symlinkSync(target, join(ws, d, ln));
        } catch {
          // name taken
        }
      }
    }
  }
  return { root, ws, outside, names };
}

const WRITABLE_NAMES = [
  "a",
  "b",
  "c",
  "d",
  "l1",
  "l2",
  "l3",
  "l4",
  "f",
  "...",
  "new",
  "outside",
  "ws",
  "workspace",
  "etc",
  "passwd",
  "%2e%2e",
  "..\\..",
];
const ROOT_ONLY = `rootonly_${randomBytes(4).toString("hex")}`;
const OUTSIDE_ONLY_NAMES = new Set([
  "deep",
  ROOT_ONLY,
  "usr",
  "proc",
  "sys",
  "dev",
  "hostname",
  "shadow",
  "os-release",
]);

function randomPath(rand: () => number, forWrite: boolean): string {
  const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const comps = [
    ...WRITABLE_NAMES,
    "..",
    ".",
    "",
    "a\u0000b",
    ...(forWrite ? [] : [SECRET_NAME, "deep", "usr", "proc"]),
  ];
  const n = 1 + Math.floor(rand() * 6);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(pick(comps));
  let p = parts.join("/");
  const r = rand();
  if (r < 0.12) p = `/${p}`;
  else if (r < 0.24) p = `${MOUNT}/${p}`;
  else if (r < 0.3) p = `${MOUNT}/../${p}`;
  else if (r < 0.34) p = `//${p}`;
  if (rand() < 0.1) p += "/";
  return p;
}

type Outcome = "ok" | "invalid" | "denied" | "notfound" | "other";

function classify(err: unknown): Outcome {
  if (!(err instanceof PlatformError)) throw err; // an unexpected crash is a failure, not an outcome
  if (err.code === Code.InvalidArgument) return "invalid";
  if (err.code === Code.PermissionDenied) return "denied";
  if (err.code === Code.NotFound) return "notfound";
  return "other";
}

/** Everything under `dir` that is not the workspace, looking for write marks. */
function scanForEscapes(dir: string, ws: string, found: string[]): void {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (p === ws) continue;
    if (e.isDirectory()) scanForEscapes(p, ws, found);
    else if (e.isFile()) {
      const text = fs.readFileSync(p, "utf8");
      if (text.includes(WRITE_MARK) || (text !== SECRET && e.name === SECRET_NAME)) found.push(p);
    }
  }
}

let base: string;
before(() => {
  base = fs.mkdtempSync(join(tmpdir(), "compute-security-"));
});
after(() => {
  fs.rmSync(base, { recursive: true, force: true });
});

describe("workspace path rules under attack", () => {
  test("≥ 100,000 generated hostile paths over random symlink layouts: 0 escapes", () => {
    const LAYOUTS = 25;
    const PATHS_PER_LAYOUT = 4000; // one op each, cycling read/write/list → 100,000 operations
    const counts: Record<string, number> = {};
    let ops = 0;
    const escapes: string[] = [];
    for (let l = 0; l < LAYOUTS; l++) {
      const seed = 1000 + l;
      const rand = rng(seed);
      const layout = makeLayout(base, rand);
      const wfs = new WorkspaceFs(layout.ws, MOUNT);
      for (let i = 0; i < PATHS_PER_LAYOUT; i++) {
        const op = i % 3;
        const path = randomPath(rand, op === 1);
        let outcome: Outcome;
        try {
          const rel = cleanWorkspacePath(path, MOUNT);
          if (op === 0) {
            const r = wfs.read(rel, 0, 1 << 16);
            if (Buffer.from(r.data).toString().includes(SECRET)) escapes.push(`read ${path} (seed ${seed})`);
          } else if (op === 1) {
            wfs.write(rel, Buffer.from(`${WRITE_MARK} ${path}`), rand() < 0.5, 0o644);
          } else {
            const r = wfs.list(rel, rand() < 0.3, 100);
            // Names that exist only outside the workspace and that no write can create inside it.
            const foreign = r.entries.find((e) => e.path.split("/").some((c) => OUTSIDE_ONLY_NAMES.has(c)));
            if (foreign) escapes.push(`list ${JSON.stringify(path)} shows ${foreign.path} (seed ${seed})`);
          }
          outcome = "ok";
        } catch (err) {
          outcome = classify(err);
        }
        // Rule 1 is purely lexical: whatever still climbs after cleaning must be INVALID_ARGUMENT.
        const cleanedClimbs = !path.startsWith("/") && /^(\.\.)(\/|$)/.test(normalizeForOracle(path));
        if (cleanedClimbs && outcome !== "invalid")
          escapes.push(`rule 1 not applied to ${JSON.stringify(path)}: ${outcome}`);
        const key = `${["read", "write", "list"][op]}:${outcome}`;
        counts[key] = (counts[key] ?? 0) + 1;
        ops++;
      }
      const found: string[] = [];
      scanForEscapes(layout.root, layout.ws, found);
      escapes.push(...found.map((f) => `write landed outside: ${f} (seed ${seed})`));
      fs.rmSync(layout.root, { recursive: true, force: true });
    }
    assert.ok(ops >= 100_000, `${ops} operations`);
    assert.deepEqual(escapes, []);
    // The generator must actually exercise every outcome, or the run proves little.
    for (const k of ["read:ok", "read:denied", "read:invalid", "write:ok", "write:denied", "list:ok", "list:denied"]) {
      assert.ok((counts[k] ?? 0) > 100, `too few ${k}: ${JSON.stringify(counts)}`);
    }
  });

  test("a component swapped for an outside symlink while calls run never redirects them", async () => {
    const layout = makeLayout(base, rng(7));
    const wfs = new WorkspaceFs(layout.ws, MOUNT);
    const swap = join(layout.ws, "swap");
    fs.mkdirSync(join(swap, "deep"), { recursive: true });
    fs.writeFileSync(join(swap, SECRET_NAME), "inside-copy");
    fs.writeFileSync(join(swap, "deep", SECRET_NAME), "inside-copy");
    // Another thread flips `swap` between the real directory and a symlink to
    // the secrets, as fast as it can (rename is atomic).
    const worker = new Worker(
      `const fs = require("node:fs");
       const { workerData: w } = require("node:worker_threads");
       fs.symlinkSync(w.outside, w.link);
       const mv = (a, b) => { try { fs.renameSync(a, b); } catch {} };
       for (;;) {
         mv(w.swap, w.parked); mv(w.link, w.swap); mv(w.swap, w.link);
         // A write may have recreated "swap" (inside the workspace) while it was away: drop it.
         try { fs.rmSync(w.swap, { recursive: true, force: true }); } catch {}
         mv(w.parked, w.swap);
       }`,
      {
        eval: true,
        workerData: {
          outside: layout.outside,
          swap,
          parked: join(layout.ws, "parked"),
          link: join(layout.ws, "swaplink"),
        },
      },
    );
    await new Promise((r) => setTimeout(r, 50));
    const escapes: string[] = [];
    const seen: Record<string, number> = {};
    const deadline = Date.now() + 15_000;
    let n = 0;
    const enough = () => n >= 3000 && (seen.readOk ?? 0) > 20 && (seen.denied ?? 0) > 20;
    while (Date.now() < deadline && n < 15_000 && !enough()) {
      const which = n % 3;
      const path = n % 2 === 0 ? `swap/${SECRET_NAME}` : `swap/deep/${SECRET_NAME}`;
      try {
        if (which === 0) {
          const text = Buffer.from(wfs.read(path, 0, 1024).data).toString();
          if (text.includes(SECRET)) escapes.push(`read ${path}`);
          seen.readOk = (seen.readOk ?? 0) + 1;
        } else if (which === 1) {
          wfs.write(`swap/deep/w${n % 5}`, Buffer.from(WRITE_MARK), false, 0o644);
          seen.writeOk = (seen.writeOk ?? 0) + 1;
        } else {
          const r = wfs.list("swap", true, 100);
          if (r.entries.some((e) => e.path.includes(SECRET_NAME) && e.size === SECRET.length)) escapes.push("list");
          seen.listOk = (seen.listOk ?? 0) + 1;
        }
      } catch (err) {
        const o = classify(err);
        seen[o] = (seen[o] ?? 0) + 1;
      }
      n++;
      if (n % 2000 === 0) await new Promise((r) => setImmediate(r));
    }
    await worker.terminate();
    const found: string[] = [];
    scanForEscapes(layout.root, layout.ws, found);
    assert.deepEqual([...escapes, ...found], []);
    // The race must really have happened: both the real dir and the symlink were met.
    assert.ok((seen.readOk ?? 0) > 10 && (seen.denied ?? 0) > 10, JSON.stringify(seen));
  });
});

/** Oracle for rule 1, written independently of cleanWorkspacePath. */
function normalizeForOracle(p: string): string {
  const out: string[] = [];
  let climbs = 0;
  for (const c of p.split("/")) {
    if (c === "" || c === ".") continue;
    if (c === "..") {
      if (out.length > 0) out.pop();
      else climbs++;
    } else out.push(c);
  }
  return [...Array(climbs).fill(".."), ...out].join("/");
}

describe("inside a sandbox", () => {
  let dataDir: string;
  let driver: LocalDriver;
  let a: string;
  let b: string;
  let aImage: string;
  const secretEnv = `COMPUTE_TEST_SECRET_${randomBytes(4).toString("hex")}`;

  before(async () => {
    process.env[secretEnv] = "do-not-leak";
    dataDir = fs.mkdtempSync(join(tmpdir(), "compute-sec-sbx-"));
    fs.chmodSync(dataDir, 0o711);
    driver = new LocalDriver({
      dataDir,
      killGraceMs: 300,
      cgroupPrefix: `platform-compute-sec-${process.pid}`,
      dieWithService: true,
    });
    const sa = contractSpec("local");
    const sb = contractSpec("local");
    a = sa.sandboxId;
    b = sb.sandboxId;
    aImage = workspaceImageOf(dataDir, sa.tenantId, sa.sessionId);
    await driver.create(sa);
    await driver.create(sb);
    await driver.waitSettled(a, AbortSignal.timeout(20_000));
    await driver.waitSettled(b, AbortSignal.timeout(20_000));
    await driver.writeFile(a, "private.txt", new TextEncoder().encode(SECRET), false, 0o600);
  });
  after(async () => {
    delete process.env[secretEnv];
    await driver.destroy(a).catch(() => {});
    await driver.destroy(b).catch(() => {});
    await driver.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const sh = (id: string, script: string) => collectExec(driver, id, { command: "/bin/sh", args: ["-c", script] });

  test("cannot write outside its workspace (system root read-only, /tmp private)", async () => {
    const marker = `escape-${randomUUID()}`;
    const r = await sh(
      a,
      `for p in /usr/${marker} /etc/${marker} /${marker} /bin/${marker} /lib/${marker}; do (echo x > $p) 2>/dev/null && echo "WROTE $p"; done; echo x > /tmp/${marker} && echo tmp-ok`,
    );
    assert.doesNotMatch(r.stdout, /WROTE/);
    assert.match(r.stdout, /tmp-ok/);
    assert.equal(fs.existsSync(`/tmp/${marker}`), false, "the sandbox's /tmp is not the host's");
    for (const p of ["/usr", "/etc", "/"]) assert.equal(fs.existsSync(join(p, marker)), false);
  });

  test("cannot see host processes", async () => {
    const r = await sh(a, "ls /proc | grep -E '^[0-9]+$' | wc -l; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '");
    const [count, ...rest] = r.stdout.split("\n");
    assert.ok(Number(count) < 10, `sees ${count} processes`);
    assert.doesNotMatch(rest.join("\n"), /node|tsx|postgres/);
    const kill = await sh(a, `kill -0 ${process.pid} 2>&1 && echo VISIBLE || echo hidden`);
    assert.match(kill.stdout, /hidden/);
  });

  test("cannot reach the network (own empty network namespace)", async () => {
    const server = net.createServer((s) => s.end("hello"));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as net.AddressInfo).port;
    let connections = 0;
    server.on("connection", () => connections++);
    try {
      const r = await sh(
        a,
        `cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; ` +
          `bash -c 'echo > /dev/tcp/127.0.0.1/${port}' 2>/dev/null && echo CONNECTED-LOCAL; ` +
          `timeout 3 bash -c 'echo > /dev/tcp/1.1.1.1/53' 2>/dev/null && echo CONNECTED-EXTERNAL; echo done`,
      );
      assert.deepEqual(r.stdout.trim().split("\n"), ["lo", "done"]);
      assert.equal(connections, 0);
    } finally {
      server.close();
    }
  });

  test("cannot read another sandbox's workspace", async () => {
    // Where a's files are on the host: its workspace image's mount point.
    const hostPath = join(new WorkspaceImage(aImage).mountPoint(), "private.txt");
    assert.ok(fs.existsSync(hostPath));
    const r = await sh(
      b,
      `cat ${hostPath} 2>&1; ls ${dataDir} 2>&1; ls ${MOUNTS_ROOT} 2>&1; grep -r ${SECRET} /workspace /tmp /etc 2>/dev/null | head -1; echo end`,
    );
    assert.doesNotMatch(r.stdout, new RegExp(SECRET));
    assert.match(r.stdout, /No such file/);
    // Different uids as well, should a path ever become visible.
    const ids = await Promise.all([sh(a, "id -u"), sh(b, "id -u")]);
    assert.notEqual(ids[0].stdout, ids[1].stdout);
    assert.notEqual(ids[0].stdout.trim(), "0");
  });

  test("cannot read host secrets: the service's environment, /root, host credentials", async () => {
    const r = await sh(
      a,
      `env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; ls -a /root 2>&1; cat /root/.bashrc 2>&1; ls /home /work /var/lib /run 2>&1; cat /etc/shadow 2>&1; grep CapEff /proc/self/status`,
    );
    assert.doesNotMatch(r.stdout, new RegExp(secretEnv));
    assert.doesNotMatch(r.stdout, /do-not-leak|DATABASE_URL|TEST_DATABASE_URL/);
    assert.match(r.stdout, /\/root.*No such file/);
    assert.doesNotMatch(r.stdout, /root:\$|root:\*/);
    assert.match(r.stdout, /CapEff:\s+0000000000000000/);
  });
});
