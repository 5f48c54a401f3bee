import { type ChildProcess, execFile, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import { constants as osConstants } from "node:os";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { ComputeReason, PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import { buildNative, nativeBinDir } from "../../native-build.ts";
import { makeSocketDir, removeStaleSocketDirs } from "./socket-dir.ts";

/** MAX_REQUEST and MAX_FIELDS of exec-helper.c. */
const HELPER_MAX_REQUEST_BYTES = 4 << 20;
const HELPER_MAX_FIELDS = 65_536;

/** Where a command runs: a sandbox's init, its uid, the exec's cgroup. */
export interface Placement {
  initPid: number;
  /** /proc/<initPid>/stat start time, so a reused pid is never entered. */
  initStartTime: string;
  uid: number;
  /** cgroup.procs files the command joins before it runs. */
  cgroupProcs: string[];
}

/** What a command needs to start inside a running sandbox. */
export interface Launch extends Placement {
  workingDir: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  /**
   * "stdin": the command's stdin is a connection the service writes to
   * (Launched.stdin); a size: it runs on a pseudo-terminal, whose input is
   * what the service writes to Launched.stdout. Absent: /dev/null.
   */
  input?: "stdin" | { rows: number; cols: number };
}

/** The built helper and the seccomp filter (raw BPF) every sandbox process runs under. */
export interface HelperBuild {
  binary: string;
  seccompFilter: Buffer;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A started command: its output streams and its end. */
export interface Launched {
  /** With a terminal, also its input: what is written here is typed on it. */
  stdout: net.Socket;
  stderr: Readable;
  /** The command's stdin (Launch.input "stdin"). */
  stdin?: net.Socket;
  /** A terminal's new size (Launch.input a size); resolves once the terminal has it (or the command is gone). */
  resize?: (rows: number, cols: number) => Promise<void>;
  /** Resolves when the command exits; rejects when it could not be started. */
  exit: Promise<ExitStatus>;
}

interface Streams {
  stdout: net.Socket;
  stderr: net.Socket;
  stdin?: net.Socket;
}

interface Pending {
  exited?: boolean;
  /** A third connection (tag 3) is the command's stdin. */
  wantStdin: boolean;
  stdout?: net.Socket;
  stderr?: net.Socket;
  stdin?: net.Socket;
  streams: { resolve: (s: Streams) => void; reject: (e: Error) => void };
  exit: { resolve: (s: ExitStatus) => void; reject: (e: Error) => void };
  /** Resizes sent and not yet applied, oldest first: the helper applies and acknowledges W in order. */
  resizes?: (() => void)[];
}

const SOURCE_DIR = dirname(fileURLToPath(import.meta.url));
const SOURCES = ["exec-helper.c", "seccomp-filter.c", "seccomp-filter.h"];
const TAG_BYTES = 5;
const SIGNAL_NAMES = new Map(Object.entries(osConstants.signals).map(([name, n]) => [n, name as NodeJS.Signals]));

/**
 * The driver's side of exec-helper.c: compiles it once per source version
 * into a private per-user directory (with the seccomp filter every sandbox
 * process runs under), keeps one helper process and the unix socket the
 * commands' stdout and stderr connect to. Forking a tiny helper instead of
 * this ~200 MB process, and one execve instead of sh → nsenter → command,
 * is most of an exec's cost.
 */
export class ExecHelper {
  private built?: Promise<HelperBuild>;
  private child?: ChildProcess;
  private server?: net.Server;
  private socketDir?: string;
  private socketPath = "";
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private lines = "";

  constructor(
    private readonly log?: Logger,
    private readonly binDir = nativeBinDir(),
  ) {}

  /** Builds the helper (or finds it built); rejects, naming what to install, without a C compiler or libseccomp. */
  build(): Promise<HelperBuild> {
    this.built ??= build(this.binDir);
    return this.built;
  }

  /**
   * Has a child made ready in placement (cgroup joined, sandbox entered) for
   * a later launch to use; returns its id. Fire and forget: a launch naming a
   * child that is gone starts the usual way.
   */
  async place(placement: Placement): Promise<number> {
    const child = await this.ensureRunning();
    const id = this.takeId();
    const { initPid, initStartTime, uid, cgroupProcs } = placement;
    this.send(child, [
      "P",
      String(id),
      String(initPid),
      initStartTime,
      String(uid),
      String(uid),
      String(cgroupProcs.length),
      ...cgroupProcs,
      // Its exec's output connections are made now (tagged when the exec comes), not on the exec's way.
      this.socketPath,
    ]);
    return id;
  }

  async launch(launch: Launch, placed = 0): Promise<Launched> {
    // Fields travel NUL-separated: a NUL inside one would shift the ones after
    // it (the socket, the cgroup.procs files this root helper writes to, the
    // argv it runs). The domain refuses them; this keeps the protocol whole
    // whoever calls the driver.
    if (
      [launch.workingDir, launch.command, ...launch.args, ...Object.entries(launch.env).flat()].some((f) =>
        f.includes("\0"),
      )
    ) {
      throw PlatformError.invalidArgument(
        "working_dir, command, args and env must not contain NUL bytes",
        ComputeReason.invalidArgument,
      );
    }
    const child = await this.ensureRunning();
    const id = this.takeId();
    const env = Object.entries(launch.env).map(([k, v]) => `${k}=${v}`);
    const input = launch.input;
    const mode =
      input === undefined ? "-" : input === "stdin" ? "s" : `t${Math.trunc(input.rows)},${Math.trunc(input.cols)}`;
    const fields = [
      "X",
      String(id),
      String(launch.initPid),
      launch.initStartTime,
      String(launch.uid),
      String(launch.uid),
      launch.workingDir,
      this.socketPath,
      String(placed),
      mode,
      String(launch.cgroupProcs.length),
      ...launch.cgroupProcs,
      String(launch.args.length + 1),
      launch.command,
      ...launch.args,
      String(env.length),
      ...env,
    ];
    // The helper exits on a request over its MAX_REQUEST (4 MiB), ending every
    // sandbox's running commands, and stops reading fields at MAX_FIELDS.
    if (
      fields.length > HELPER_MAX_FIELDS ||
      fields.reduce((n, f) => n + Buffer.byteLength(f) + 1, 0) > HELPER_MAX_REQUEST_BYTES
    ) {
      throw PlatformError.invalidArgument(
        "the command line is too large for the exec helper",
        ComputeReason.argumentsTooLong,
      );
    }
    let pending!: Pending;
    const streams = new Promise<Streams>((resolve, reject) => {
      pending = {
        wantStdin: input === "stdin",
        streams: { resolve, reject },
        exit: { resolve: () => {}, reject: () => {} },
      };
    });
    const exit = new Promise<ExitStatus>((resolve, reject) => {
      pending.exit = { resolve, reject };
    });
    // A failed start rejects both; whoever awaits only one must not see an unhandled rejection.
    exit.catch(() => {});
    this.pending.set(id, pending);
    this.holdLoop();
    this.send(child, fields);
    const { stdout, stderr, stdin } = await streams;
    const resize =
      input !== undefined && input !== "stdin"
        ? (rows: number, cols: number) =>
            new Promise<void>((resolve) => {
              // Only while it runs: a later id may be another command's.
              const p = this.pending.get(id);
              if (this.child !== child || !p || p.exited) return resolve();
              (p.resizes ??= []).push(resolve);
              this.send(child, ["W", String(id), String(Math.trunc(rows)), String(Math.trunc(cols))]);
            })
        : undefined;
    return { stdout, stderr, exit, ...(stdin ? { stdin } : {}), ...(resize ? { resize } : {}) };
  }

  /** Also when the service exits without closing the driver. */
  private readonly removeSocketDir = () => {
    if (this.socketDir) fs.rmSync(this.socketDir, { recursive: true, force: true });
    this.socketDir = undefined;
  };

  private takeId(): number {
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1;
    return id;
  }

  private send(child: ChildProcess, fields: string[]): void {
    const body = Buffer.from(`${fields.join("\0")}\0`);
    const header = Buffer.alloc(4);
    header.writeUInt32LE(body.length);
    child.stdin?.write(Buffer.concat([header, body]));
  }

  async close(): Promise<void> {
    this.child?.stdin?.end();
    this.child = undefined;
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    this.server = undefined;
    this.removeSocketDir();
    process.off("exit", this.removeSocketDir);
  }

  /**
   * Pending starts and ends keep the process alive (a caller awaits them);
   * an idle helper does not.
   */
  private holdLoop(): void {
    const stdout = this.child?.stdout as unknown as { ref?: () => void; unref?: () => void } | null | undefined;
    if (this.pending.size > 0) stdout?.ref?.();
    else stdout?.unref?.();
  }

  private forget(id: number): void {
    settleResizes(this.pending.get(id));
    this.pending.delete(id);
    this.holdLoop();
  }

  private async ensureRunning(): Promise<ChildProcess> {
    if (this.child) return this.child;
    const { binary } = await this.build();
    if (this.child) return this.child;
    if (!this.server) await this.listen();
    const child = spawn(binary, [], { stdio: ["pipe", "pipe", "inherit"] });
    this.child = child;
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (text: string) => this.onReport(text));
    child.on("error", (err) => this.onHelperGone(child, err));
    // A request written while the helper is exiting (a stop) gets EPIPE: that request fails, compute goes on
    // (unhandled, it ended compute in the middle of its close and left frozen sandboxes: fault case 6).
    child.stdin?.on("error", (err) => this.onHelperGone(child, err));
    child.on("exit", (code, signal) => this.onHelperGone(child, new Error(`exec helper exited (${code ?? signal})`)));
    // It must not keep the service alive on its own, nor outlive it.
    child.unref();
    (child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return child;
  }

  private async listen(): Promise<void> {
    // Those of killed services go first (this one's is removed on close or exit).
    const stale = removeStaleSocketDirs();
    if (stale.length > 0) this.log?.info({ removed: stale }, "removed exec socket directories of killed services");
    // A fresh root-only directory: nothing but this process can connect.
    this.socketDir = makeSocketDir();
    this.socketPath = join(this.socketDir, "streams.sock");
    process.once("exit", this.removeSocketDir);
    const server = net.createServer((socket) => this.onStream(socket));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.socketPath, () => resolve());
    });
    server.unref();
    this.server = server;
  }

  /**
   * A command's stdout or stderr connection: the helper wrote a tag first
   * (on those it made with a placed child, only when that child's exec
   * came). Handed over paused, with any output that came with the tag put back.
   */
  private onStream(socket: net.Socket): void {
    socket.on("error", () => {});
    // One made ahead for a placed child's exec waits here for its tag; it must not keep the service alive meanwhile.
    socket.unref();
    let tag = Buffer.alloc(0);
    const onTag = (chunk: Buffer) => {
      tag = Buffer.concat([tag, chunk]);
      if (tag.length < TAG_BYTES) return;
      socket.ref();
      socket.pause();
      socket.off("data", onTag);
      if (tag.length > TAG_BYTES) socket.unshift(tag.subarray(TAG_BYTES));
      const id = tag.readUInt32LE(0);
      const p = this.pending.get(id);
      if (!p) return void socket.destroy();
      if (tag[4] === 1) p.stdout = socket;
      else if (tag[4] === 3 && p.wantStdin) p.stdin = socket;
      else if (tag[4] === 2) p.stderr = socket;
      else return void socket.destroy();
      if (!p.stdout || !p.stderr || (p.wantStdin && !p.stdin)) return;
      p.streams.resolve({ stdout: p.stdout, stderr: p.stderr, ...(p.stdin ? { stdin: p.stdin } : {}) });
      // The end may have been reported before the connections were accepted.
      if (p.exited) this.forget(id);
    };
    socket.on("data", onTag);
  }

  private onReport(text: string): void {
    this.lines += text;
    let nl = this.lines.indexOf("\n");
    while (nl >= 0) {
      const line = this.lines.slice(0, nl);
      this.lines = this.lines.slice(nl + 1);
      nl = this.lines.indexOf("\n");
      const [kind, idText, ...rest] = line.split(" ");
      const id = Number(idText);
      const p = this.pending.get(id);
      if (!p) {
        if (kind === "F") this.log?.error({ report: line }, "exec helper refused a request");
        continue;
      }
      if (kind === "R") {
        p.resizes?.shift()?.();
      } else if (kind === "E") {
        p.exited = true;
        // Its terminal is gone with it: a resize waiting for it has nothing left to wait for.
        settleResizes(p);
        if (p.stdout && p.stderr && (!p.wantStdin || p.stdin)) this.forget(id);
        const [code, sig] = rest.map(Number);
        p.exit.resolve({
          code: code !== undefined && code >= 0 ? code : null,
          signal: sig ? (SIGNAL_NAMES.get(sig) ?? "SIGKILL") : null,
        });
      } else {
        this.forget(id);
        const err = new Error(`exec helper: ${rest.join(" ")}`);
        p.streams.reject(err);
        p.exit.reject(err);
        p.stdout?.destroy();
        p.stderr?.destroy();
        p.stdin?.destroy();
      }
    }
  }

  private onHelperGone(child: ChildProcess, err: Error): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.lines = "";
    if (this.pending.size > 0)
      this.log?.error({ err }, "exec helper died; its running commands are lost to their callers");
    for (const p of this.pending.values()) {
      settleResizes(p);
      p.streams.reject(err);
      p.exit.reject(err);
    }
    this.pending.clear();
  }
}

/**
 * exec-helper.c (with seccomp-filter.c, against libseccomp) built in dir, and
 * the seccomp filter it prints as raw BPF (what bwrap reads).
 */
async function build(dir: string): Promise<HelperBuild> {
  const binary = await buildNative(
    {
      name: "exec-helper",
      sourceDir: SOURCE_DIR,
      sources: SOURCES,
      libraries: ["-lseccomp"],
      whenCompileFails:
        "sandboxes need a C compiler and libseccomp; install gcc, libc6-dev and libseccomp-dev (scripts/setup.sh does)",
    },
    dir,
  );
  return { binary, seccompFilter: await seccompFilterOf(binary) };
}

async function seccompFilterOf(binary: string): Promise<Buffer> {
  const { stdout } = await promisify(execFile)(binary, ["--seccomp-bpf"], { encoding: "buffer" });
  // A sock_filter is 8 bytes; an empty or torn program must not reach bwrap.
  if (stdout.length === 0 || stdout.length % 8 !== 0) throw new Error(`${binary} printed no seccomp filter`);
  return stdout;
}

function settleResizes(p: Pending | undefined): void {
  for (const done of p?.resizes?.splice(0) ?? []) done();
}
