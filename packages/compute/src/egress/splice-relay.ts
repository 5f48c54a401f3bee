// The proxy's side of splice-relay.c: one relay process per proxy, handed
// each open tunnel (its two sockets) so the bytes move in the kernel instead
// of through this event loop. The sockets stay open here, unread, until the
// relay says it is done with them: their descriptor numbers cannot be reused
// by another connection while the relay may still take them.
import { type ChildProcess, spawn } from "node:child_process";
import type { Socket } from "node:net";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import { buildNative } from "../native-build.ts";

/** What the relay tells the owner of one tunnel. */
export interface TunnelReports {
  /** Bytes moved since the last report (egress: client → upstream). */
  progress(egressBytes: number, ingressBytes: number): void;
  /** The relay is done with the sockets; `taken` false: it never took them (the caller relays). */
  ended(taken: boolean): void;
}

interface Tunnel {
  reports: TunnelReports;
  egress: number;
  ingress: number;
}

let built: Promise<string> | undefined;

type Handle = { fd?: number; reading?: boolean; readStop?: () => number };

/** The descriptor of a connected TCP socket, or undefined when Node does not expose one. */
function fdOf(socket: Socket): number | undefined {
  const fd = (socket as unknown as { _handle?: Handle })._handle?.fd;
  return typeof fd === "number" && fd >= 0 ? fd : undefined;
}

/**
 * Stops Node reading `socket` now (pause() alone only stops at the buffer's
 * high-water mark) and returns what it had read and not yet handed on.
 */
function stopReading(socket: Socket): Buffer[] {
  const handle = (socket as unknown as { _handle?: Handle })._handle;
  if (handle?.reading && handle.readStop) {
    handle.reading = false;
    handle.readStop();
  }
  socket.pause();
  const held: Buffer[] = [];
  for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null)
    held.push(chunk);
  return held;
}

function written(socket: Socket, chunks: Buffer[]): Promise<void> {
  if (chunks.length === 0) return Promise.resolve();
  return new Promise((resolve, reject) =>
    socket.write(Buffer.concat(chunks), (err) => (err ? reject(err) : resolve())),
  );
}

export class SpliceRelay {
  private readonly tunnels = new Map<string, Tunnel>();
  private nextId = 1;
  private lines = "";
  private exited = false;
  private closing = false;

  private constructor(
    private readonly child: ChildProcess,
    private readonly log?: Logger,
  ) {
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (d: string) => this.onOutput(d));
    child.stdin?.on("error", () => {});
    child.on("exit", (code, signal) => {
      if (!this.closing)
        this.log?.warn({ code, signal }, "egress splice relay exited; relaying in the service from now on");
      this.exited = true;
      // Its descriptors closed with it: every tunnel is over.
      for (const [id, t] of this.tunnels) {
        this.tunnels.delete(id);
        t.reports.ended(true);
      }
    });
  }

  /**
   * Builds and starts the relay; undefined where it cannot run here (no C
   * compiler, no pidfd_getfd or no right to use it on this process): the
   * proxy then relays in Node, slower but the same.
   */
  static async start(log?: Logger): Promise<SpliceRelay | undefined> {
    try {
      const binary = await SpliceRelay.build();
      const child = spawn(binary, [String(process.pid)], { stdio: ["pipe", "pipe", "pipe"] });
      let stderr = "";
      child.stderr?.on("data", (d) => {
        stderr += d;
      });
      const ready = await new Promise<boolean>((resolve) => {
        child.stdout?.once("data", (d: Buffer) => resolve(d.toString().startsWith("ready\n")));
        child.once("error", () => resolve(false));
        child.once("exit", () => resolve(false));
      });
      if (!ready) {
        child.kill("SIGKILL");
        log?.info({ reason: stderr.trim() }, "egress splice relay unavailable; relaying in the service");
        return undefined;
      }
      return new SpliceRelay(child, log);
    } catch (err) {
      log?.info(
        { reason: (err as Error).message.split("\n")[0] },
        "egress splice relay unavailable; relaying in the service",
      );
      return undefined;
    }
  }

  /** The relay's binary, compiled once per process (and once per source version on the machine). */
  static build(): Promise<string> {
    built ??= buildNative({
      name: "splice-relay",
      sourceDir: dirname(fileURLToPath(import.meta.url)),
      sources: ["splice-relay.c"],
    });
    return built;
  }

  /**
   * Hands a tunnel over: Node stops reading both sockets, forwards what it
   * had already read (`first` and anything buffered: counted in the first
   * progress report), then the relay takes both descriptors. Returns an
   * ender (the tunnel's sandbox is gone), or undefined if the relay cannot
   * take it (the caller relays it; the sockets are untouched, only paused).
   */
  async hand(
    client: Socket,
    upstream: Socket,
    first: Buffer,
    reports: TunnelReports,
  ): Promise<(() => void) | undefined> {
    const cfd = fdOf(client);
    const ufd = fdOf(upstream);
    if (this.exited || cfd === undefined || ufd === undefined) return undefined;
    const fromClient = [first, ...stopReading(client)].filter((b) => b.length > 0);
    const fromUpstream = stopReading(upstream);
    await Promise.all([written(upstream, fromClient), written(client, fromUpstream)]);
    const sum = (bs: Buffer[]) => bs.reduce((n, b) => n + b.length, 0);
    reports.progress(sum(fromClient), sum(fromUpstream));
    const id = String(this.nextId++);
    this.tunnels.set(id, { reports, egress: 0, ingress: 0 });
    this.child.stdin?.write(`A ${id} ${cfd} ${ufd}\n`);
    return () => {
      if (this.tunnels.has(id)) this.child.stdin?.write(`X ${id}\n`);
    };
  }

  /** Ends the relay; its tunnels end with it. */
  async close(): Promise<void> {
    if (this.exited) return;
    this.closing = true;
    const gone = new Promise<void>((r) => this.child.once("exit", () => r()));
    this.child.stdin?.end();
    await gone;
  }

  private onOutput(data: string): void {
    this.lines += data;
    for (let nl = this.lines.indexOf("\n"); nl >= 0; nl = this.lines.indexOf("\n")) {
      const [kind, id = "", a = "", b = ""] = this.lines.slice(0, nl).split(" ");
      this.lines = this.lines.slice(nl + 1);
      const t = this.tunnels.get(id);
      if (!t) continue;
      if (kind === "E") {
        this.tunnels.delete(id);
        this.log?.warn({ errno: Number(a) }, "egress splice relay could not take a tunnel; relaying it in the service");
        t.reports.ended(false);
        continue;
      }
      const egress = Number(a);
      const ingress = Number(b);
      if (egress > t.egress || ingress > t.ingress) t.reports.progress(egress - t.egress, ingress - t.ingress);
      t.egress = egress;
      t.ingress = ingress;
      if (kind === "D") {
        this.tunnels.delete(id);
        t.reports.ended(true);
      }
    }
  }
}
