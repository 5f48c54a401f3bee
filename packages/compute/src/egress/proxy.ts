import { connect, createServer, isIP, type Server, type Socket } from "node:net";
import { cidrAllows, domainAllowed, type NetworkPolicy } from "@platform/network-policy";
import type { Logger } from "pino";
import type { NetworkEventRecord, NetworkEventStore } from "../store/network-event-store.ts";
import { canonicalAddress, explicitlyAllowed, isHostAddress, specialRange } from "./addresses.ts";
import type { EgressResolver } from "./resolver.ts";
import { SpliceRelay } from "./splice-relay.ts";
import { StreamReader } from "./stream-reader.ts";

/** Why a connection was refused (NetworkEvent.reason). */
export type DenyReason =
  | "not_allowed"
  | "private_address"
  | "host_service"
  | "resolve_failed"
  | "connect_failed"
  | "bad_request";

export type Decision = { allowed: true; address: string } | { allowed: false; reason: DenyReason; address: string };

export interface EgressProxyOptions {
  resolver: EgressResolver;
  /** Ports of the host's own services, never reachable on any address of the host, whatever the policy. */
  protectedPorts: number[];
  /** Addresses never reachable whatever the policy (the Kubernetes proxy: its database's), refused as host_service. */
  deniedAddresses?: string[];
  events: NetworkEventStore;
  connectTimeoutMs?: number;
  /** Bounds one sandbox puts on compute (defaults: PROXY_LIMITS). */
  limits?: Partial<typeof PROXY_LIMITS>;
  logger?: Logger;
  /**
   * Relay open tunnels' bytes with splice(2) in a helper process (splice-relay.c) instead of
   * through this event loop, where the machine allows it (falls back to Node's relay).
   */
  spliceRelay?: boolean;
}

/**
 * What one sandbox can hold of compute through its proxy: open connections
 * (each is two sockets and buffers in this process; more are closed at
 * once), the time a connection may take to say where it goes, and the
 * events stored for it (beyond, connections are still judged and counted,
 * but no longer recorded one by one).
 */
export const PROXY_LIMITS = {
  maxConnectionsPerSandbox: 256,
  handshakeTimeoutMs: 30_000,
  maxEventsPerSandbox: 100_000,
  /** The shared listener (Kubernetes): connections open before they name their sandbox. */
  maxUnidentified: 1024,
};

interface Attached {
  server?: Server;
  policy?: NetworkPolicy;
  egressBytes: number;
  ingressBytes: number;
  seq: number;
  open: Set<Socket>;
  /** Connections from the sandbox open now. */
  clients: number;
  /** Told once that its events are no longer stored. */
  eventsCapped?: boolean;
  /** Events decided but not yet stored. */
  recording: number;
  /** Loaded from the store (totals, last seq) before the first event is written. */
  ready: Promise<void>;
}

const HEAD_MAX = 64 * 1024;

/** One client connection being served: its sandbox and when it arrived. */
interface Conn {
  sandboxId: string;
  entry: Attached;
  client: Socket;
  started: number;
}

/** Where a request goes, and how it asked. */
interface Dest {
  protocol: NetworkEventRecord["protocol"];
  host: string;
  port: number;
}

/**
 * Who a connection to the shared listener is, from the credential it
 * presents (HTTP Proxy-Authorization Basic, or SOCKS5 username/password):
 * its sandbox and that sandbox's policy now, or undefined (refused).
 */
export type EgressIdentify = (
  username: string,
  password: string,
) => Promise<{ sandboxId: string; policy: NetworkPolicy | undefined } | undefined>;

/**
 * The egress proxy: one unix socket per sandbox with a policy, each
 * speaking HTTP (CONNECT and absolute-URI forwarding) and SOCKS5 (told
 * apart by the first byte). It resolves names itself, checks the name and
 * the address it will connect to against the sandbox's policy, connects to
 * exactly that address (no second lookup a rebinding answer could change),
 * counts the bytes each way and records every attempt.
 */
export class EgressProxy {
  private readonly sandboxes = new Map<string, Attached>();
  private readonly log?: Logger;
  private readonly listeners = new Set<(event: NetworkEventRecord) => void>();
  private readonly limits: typeof PROXY_LIMITS;
  private readonly shared = new Set<Server>();
  /** Shared-listener connections not yet identified (bounded: they hold no sandbox's budget yet). */
  private readonly unidentified = new Set<Socket>();
  /** Started at the first tunnel (an idle platform holds no relay process). */
  private splice?: Promise<SpliceRelay | undefined>;
  /** Tunnels the splice relay holds, by upstream socket: how to end one. */
  private readonly spliced = new WeakMap<Socket, () => void>();

  constructor(private readonly options: EgressProxyOptions) {
    this.log = options.logger;
    this.limits = { ...PROXY_LIMITS, ...options.limits };
    // Compiled ahead (a no-op once built), so the first tunnel waits only for the relay's start.
    if (options.spliceRelay) SpliceRelay.build().catch(() => {});
  }

  private relayProcess(): Promise<SpliceRelay | undefined> | undefined {
    if (!this.options.spliceRelay) return undefined;
    this.splice ??= SpliceRelay.start(this.log);
    return this.splice;
  }

  /** Whether tunnels are relayed by the splice relay (false: by this process); starts it if it is not yet. */
  async relaysInKernel(): Promise<boolean> {
    return (await this.relayProcess()) !== undefined;
  }

  /**
   * Serves the connections `listener` accepts (the sandbox's own, made in its
   * network namespace: netns-listener.ts) under the sandbox's policy, which
   * applies to the next connection; a listener served before is closed.
   */
  async attach(sandboxId: string, policy: NetworkPolicy | undefined, listener: Server): Promise<void> {
    const entry = this.entry(sandboxId);
    entry.policy = policy;
    await entry.ready;
    if (entry.server !== listener) await this.detach(sandboxId);
    entry.server = listener;
    listener.on("connection", (socket: Socket) => this.serve(sandboxId, entry, socket));
  }

  /** Replaces the policy of a sandbox (served or not); the next connection follows it. */
  setPolicy(sandboxId: string, policy: NetworkPolicy | undefined): void {
    this.entry(sandboxId).policy = policy;
  }

  /** Stops serving the sandbox: its listener is closed and its open connections too. Counters stay readable. */
  async detach(sandboxId: string): Promise<void> {
    const entry = this.sandboxes.get(sandboxId);
    if (!entry?.server) return;
    const server = entry.server;
    entry.server = undefined;
    for (const s of entry.open) {
      const end = this.spliced.get(s);
      if (end) end();
      else s.destroy();
    }
    await new Promise<void>((r) => server.close(() => r()));
  }

  /** Forgets a sandbox (after its destroy). */
  async forget(sandboxId: string): Promise<void> {
    await this.detach(sandboxId);
    this.sandboxes.delete(sandboxId);
  }

  /** Bytes since the sandbox was created (open connections included, as they flow). */
  counters(sandboxId: string): { egressBytes: number; ingressBytes: number } {
    const e = this.sandboxes.get(sandboxId);
    return { egressBytes: e?.egressBytes ?? 0, ingressBytes: e?.ingressBytes ?? 0 };
  }

  /** Waits until the sandbox's totals from before a restart are loaded. */
  async loaded(sandboxId: string): Promise<void> {
    await this.entry(sandboxId).ready;
  }

  /** Resolves once the sandbox has no open connection and every event is stored (tests, accounting at an exec's end). */
  async settled(sandboxId: string, timeoutMs = 5000): Promise<void> {
    const entry = this.sandboxes.get(sandboxId);
    const until = Date.now() + timeoutMs;
    while (entry && (entry.open.size > 0 || entry.recording > 0) && Date.now() < until)
      await new Promise((r) => setTimeout(r, 5));
  }

  onEvent(listener: (event: NetworkEventRecord) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    const shared = [...this.shared];
    this.shared.clear();
    for (const s of this.unidentified) s.destroy();
    await Promise.all([
      ...[...this.sandboxes.keys()].map((id) => this.detach(id)),
      ...shared.map((server) => new Promise<void>((r) => server.close(() => r()))),
    ]);
    const splice = this.splice;
    this.splice = undefined;
    await (await splice)?.close();
  }

  /**
   * One TCP listener for every sandbox (the Kubernetes egress proxy): each
   * connection names its sandbox with a credential before anything else,
   * and the policy `identify` returns applies to it. A connection without a
   * valid credential is refused and recorded nowhere (it has no sandbox).
   */
  async listenShared(options: { host: string; port: number; identify: EgressIdentify }): Promise<Server> {
    const server = createServer((socket) => this.serveShared(socket, options.identify));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port, options.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.shared.add(server);
    return server;
  }

  /** The policy decision for one destination: the name, then each resolved address in turn. */
  async decide(policy: NetworkPolicy | undefined, host: string, port: number): Promise<Decision> {
    if (!policy || !(port >= 1 && port <= 65535)) return { allowed: false, reason: "not_allowed", address: "" };
    const literal = isIP(host) !== 0;
    const nameAllowed = !literal && (policy.allowAll || domainAllowed(policy, host));
    // A name the policy does not list is not looked up (a lookup is itself a message out), unless CIDRs may admit it.
    if (!literal && !nameAllowed && policy.allowedCidrs.length === 0)
      return { allowed: false, reason: "not_allowed", address: "" };
    let addresses: string[];
    try {
      addresses = literal ? [host] : await this.options.resolver(host);
    } catch {
      addresses = [];
    }
    if (addresses.length === 0) return { allowed: false, reason: "resolve_failed", address: "" };
    let first: Decision | undefined;
    for (const raw of addresses) {
      const address = canonicalAddress(raw);
      const d = this.decideAddress(policy, address, port, nameAllowed || (literal && policy.allowAll));
      if (d.allowed) return d;
      first ??= d;
    }
    return first as Decision;
  }

  private decideAddress(policy: NetworkPolicy, address: string, port: number, nameAllowed: boolean): Decision {
    const protectedPort = this.options.protectedPorts.includes(port);
    const special = specialRange(address) !== undefined;
    // The host's addresses are read at most once a decision, and only when the answer can change it: the read
    // dumps every link over netlink (80 µs here warm, 0.4 ms between a sandbox's sparse connections).
    const host = (protectedPort || !special) && isHostAddress(address);
    if (host && protectedPort) return { allowed: false, reason: "host_service", address };
    if (this.options.deniedAddresses?.includes(address)) return { allowed: false, reason: "host_service", address };
    if (special || host) {
      return explicitlyAllowed(policy, address, port)
        ? { allowed: true, address }
        : { allowed: false, reason: "private_address", address };
    }
    if (nameAllowed || cidrAllows(policy, address, port)) return { allowed: true, address };
    return { allowed: false, reason: "not_allowed", address };
  }

  private entry(sandboxId: string): Attached {
    let e = this.sandboxes.get(sandboxId);
    if (!e) {
      const created: Attached = {
        egressBytes: 0,
        ingressBytes: 0,
        seq: 0,
        open: new Set(),
        clients: 0,
        recording: 0,
        ready: Promise.resolve(),
      };
      created.ready = this.options.events.totals(sandboxId).then(
        (t) => {
          created.seq = Math.max(created.seq, t.lastSeq);
          created.egressBytes += t.egressBytes;
          created.ingressBytes += t.ingressBytes;
        },
        (err) => this.log?.error({ err, sandboxId }, "reading a sandbox's network totals failed"),
      );
      e = created;
      this.sandboxes.set(sandboxId, e);
    }
    return e;
  }

  /** Counts the connection against its sandbox's bound; false (and closed) beyond it. */
  private admit(sandboxId: string, entry: Attached, client: Socket): boolean {
    if (entry.clients >= this.limits.maxConnectionsPerSandbox) {
      this.log?.debug({ sandboxId }, "egress connection refused: too many open");
      client.destroy();
      return false;
    }
    entry.clients++;
    entry.open.add(client);
    client.on("close", () => {
      entry.clients--;
      entry.open.delete(client);
    });
    return true;
  }

  private serveShared(client: Socket, identify: EgressIdentify): void {
    client.on("error", () => {});
    if (this.unidentified.size >= this.limits.maxUnidentified) {
      client.destroy();
      return;
    }
    this.unidentified.add(client);
    client.on("close", () => this.unidentified.delete(client));
    client.setNoDelay(true);
    client.setTimeout(this.limits.handshakeTimeoutMs, () => client.destroy());
    const reader = new StreamReader(client);
    const started = performance.now();
    const who = async (user: string, password: string) => {
      const id = await identify(user, password);
      this.unidentified.delete(client);
      if (!id) return undefined;
      const entry = this.entry(id.sandboxId);
      entry.policy = id.policy;
      await entry.ready;
      return this.admit(id.sandboxId, entry, client) ? { sandboxId: id.sandboxId, entry } : undefined;
    };
    void (async () => {
      if ((await reader.peek()) === 5) {
        const [, nMethods = 0] = await reader.read(2);
        const methods = await reader.read(nMethods);
        // Only username/password (RFC 1929): no credential, no sandbox.
        if (!methods.includes(2)) return void client.end(Buffer.from([5, 0xff]));
        client.write(Buffer.from([5, 2]));
        const [, ulen = 0] = await reader.read(2);
        const user = (await reader.read(ulen)).toString("latin1");
        const [plen = 0] = await reader.read(1);
        const password = (await reader.read(plen)).toString("latin1");
        const found = await who(user, password);
        if (!found) return void client.end(Buffer.from([1, 1]));
        client.write(Buffer.from([1, 0]));
        return this.socks5({ ...found, client, started }, reader, true);
      }
      const head = (await reader.readUntil("\r\n\r\n", HEAD_MAX)).toString("latin1");
      const auth = /^proxy-authorization:[ \t]*basic[ \t]+([A-Za-z0-9+/=]+)[ \t]*\r?$/im.exec(head)?.[1];
      const decoded = auth ? Buffer.from(auth, "base64").toString("latin1") : "";
      const colon = decoded.indexOf(":");
      const found = colon > 0 ? await who(decoded.slice(0, colon), decoded.slice(colon + 1)) : undefined;
      if (!found) {
        const body = "egress proxy: a sandbox credential is required\n";
        return void client.end(
          `HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="sandbox-egress"\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
        );
      }
      return this.httpRequest({ ...found, client, started }, reader, head);
    })().catch((err) => {
      this.log?.debug({ err }, "egress handshake failed");
      client.destroy();
    });
  }

  private serve(sandboxId: string, entry: Attached, client: Socket): void {
    client.on("error", () => {});
    if (!this.admit(sandboxId, entry, client)) return;
    client.setNoDelay(true);
    // Until it says where it goes; the relay clears it (a quiet tunnel is the client's business).
    client.setTimeout(this.limits.handshakeTimeoutMs, () => client.destroy());
    const reader = new StreamReader(client);
    void this.handshake(sandboxId, entry, client, reader).catch((err) => {
      this.log?.debug({ err, sandboxId }, "egress handshake failed");
      client.destroy();
    });
  }

  private async handshake(sandboxId: string, entry: Attached, client: Socket, reader: StreamReader): Promise<void> {
    const conn = { sandboxId, entry, client, started: performance.now() };
    if ((await reader.peek()) === 5) return this.socks5(conn, reader);
    const head = (await reader.readUntil("\r\n\r\n", HEAD_MAX)).toString("latin1");
    return this.httpRequest(conn, reader, head);
  }

  /** An HTTP proxy request whose head is read: CONNECT or an absolute-URI request. */
  private async httpRequest(conn: Conn, reader: StreamReader, head: string): Promise<void> {
    const lines = head.split("\r\n");
    const [method = "", target = "", version = ""] = (lines[0] ?? "").split(" ");
    if (method.toUpperCase() === "CONNECT") {
      const m = /^\[?([^\]]*?)\]?:(\d{1,5})$/.exec(target);
      if (!m) return this.refuseHttp(conn, { protocol: "connect", host: target, port: 0 }, "bad_request");
      const dest: Dest = { protocol: "connect", host: m[1] as string, port: Number(m[2]) };
      const reached = await this.reach(conn, dest, (reason, address) => this.refuseHttp(conn, dest, reason, address));
      if (!reached) return;
      conn.client.write(`${version || "HTTP/1.1"} 200 Connection Established\r\n\r\n`);
      return this.relay(conn, dest, reached, reader.rest());
    }
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return this.refuseHttp(conn, { protocol: "http", host: target.slice(0, 253), port: 0 }, "bad_request");
    }
    if (url.protocol !== "http:")
      return this.refuseHttp(conn, { protocol: "http", host: url.hostname, port: 0 }, "bad_request");
    const dest: Dest = {
      protocol: "http",
      host: url.hostname.replace(/^\[|\]$/g, ""),
      port: url.port ? Number(url.port) : 80,
    };
    const reached = await this.reach(conn, dest, (reason, address) => this.refuseHttp(conn, dest, reason, address));
    if (!reached) return;
    // Origin-form to the server; proxy-only headers dropped; one request per connection (the next may name another host).
    const kept = lines
      .slice(1)
      .filter((l) => l !== "" && !/^(proxy-connection|proxy-authorization|connection|keep-alive)\s*:/i.test(l));
    const rewritten = [`${method} ${url.pathname}${url.search} ${version}`, ...kept, "Connection: close", "", ""].join(
      "\r\n",
    );
    const first = Buffer.concat([Buffer.from(rewritten, "latin1"), reader.rest()]);
    return this.relay(conn, dest, reached, first);
  }

  private async socks5(conn: Conn, reader: StreamReader, greeted = false): Promise<void> {
    const { client } = conn;
    if (!greeted) {
      const [, nMethods = 0] = await reader.read(2);
      const methods = await reader.read(nMethods);
      if (!methods.includes(0)) {
        client.end(Buffer.from([5, 0xff]));
        return;
      }
      client.write(Buffer.from([5, 0]));
    }
    const [ver, cmd, , atyp] = await reader.read(4);
    let host: string;
    if (atyp === 1) host = [...(await reader.read(4))].join(".");
    else if (atyp === 4) {
      const b = await reader.read(16);
      host = canonicalAddress(Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2).toString(16)).join(":"));
    } else if (atyp === 3) {
      const [len = 0] = await reader.read(1);
      host = (await reader.read(len)).toString("latin1");
    } else {
      client.end(socksReply(8));
      return;
    }
    const dest: Dest = { protocol: "socks5", host, port: (await reader.read(2)).readUInt16BE(0) };
    const refuse = (reason: DenyReason, address: string) => {
      this.record(conn, { ...dest, address, allowed: false, reason });
      client.end(socksReply(SOCKS_REFUSALS[reason]));
    };
    if (ver !== 5 || cmd !== 1) return refuse("bad_request", "");
    const reached = await this.reach(conn, dest, refuse);
    if (!reached) return;
    client.write(socksReply(0));
    return this.relay(conn, dest, reached, reader.rest());
  }

  /**
   * The policy's decision on `dest`, then a connection to the address it
   * chose: the upstream socket and that address, or undefined once `refuse`
   * has answered the client (the policy's reason, or connect_failed).
   */
  private async reach(
    conn: Conn,
    dest: Dest,
    refuse: (reason: DenyReason, address: string) => void,
  ): Promise<{ upstream: Socket; address: string } | undefined> {
    const decision = await this.decide(conn.entry.policy, dest.host, dest.port);
    if (!decision.allowed) return void refuse(decision.reason, decision.address);
    const upstream = await this.open(decision.address, dest.port);
    if (!upstream) return void refuse("connect_failed", decision.address);
    return { upstream, address: decision.address };
  }

  private open(address: string, port: number): Promise<Socket | undefined> {
    return new Promise((resolve) => {
      const socket = connect({ host: address, port, timeout: this.options.connectTimeoutMs ?? 10_000 });
      const fail = () => {
        socket.destroy();
        resolve(undefined);
      };
      socket.once("error", fail);
      socket.once("timeout", fail);
      socket.once("connect", () => {
        socket.off("error", fail);
        socket.off("timeout", fail);
        socket.setTimeout(0);
        socket.setNoDelay(true);
        resolve(socket);
      });
    });
  }

  private relay(
    conn: Conn,
    dest: Dest,
    { upstream, address }: { upstream: Socket; address: string },
    first: Buffer,
  ): void {
    const { entry, client } = conn;
    entry.open.add(upstream);
    client.setTimeout(0);
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
    let egress = 0;
    let ingress = 0;
    const count = (e: number, i: number) => {
      egress += e;
      ingress += i;
      entry.egressBytes += e;
      entry.ingressBytes += i;
    };
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      entry.open.delete(upstream);
      this.record(conn, { ...dest, address, allowed: true, reason: "", egressBytes: egress, ingressBytes: ingress });
    };
    const inNode = (head: Buffer) => this.pipeInNode(client, upstream, head, count, finish);
    const splice = this.relayProcess();
    if (!splice) {
      inNode(first);
      return;
    }
    void splice
      .then(async (relay) => {
        const end = await relay?.hand(client, upstream, first, {
          progress: count,
          ended: (taken) => {
            this.spliced.delete(upstream);
            if (!taken) {
              inNode(Buffer.alloc(0));
              return;
            }
            client.destroy();
            upstream.destroy();
            finish();
          },
        });
        if (end) this.spliced.set(upstream, end);
        else inNode(first);
      })
      .catch(() => {
        // A socket failed while its buffered bytes were forwarded: the tunnel is over.
        client.destroy();
        upstream.destroy();
        finish();
      });
  }

  /** Node's relay: both directions piped through this process, counted as they pass. */
  private pipeInNode(
    client: Socket,
    upstream: Socket,
    first: Buffer,
    count: (egress: number, ingress: number) => void,
    finish: () => void,
  ): void {
    if (first.length > 0) {
      count(first.length, 0);
      upstream.write(first);
    }
    client.on("data", (d: Buffer) => count(d.length, 0));
    upstream.on("data", (d: Buffer) => count(0, d.length));
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
    let closed = 0;
    const onClose = () => {
      if (++closed === 2) finish();
    };
    client.on("close", () => {
      upstream.destroySoon();
      onClose();
    });
    upstream.on("close", () => {
      client.destroySoon();
      onClose();
    });
  }

  /** A refusal as an HTTP answer: 502 when the destination did not answer, else 403. */
  private refuseHttp(conn: Conn, { protocol, host, port }: Dest, reason: DenyReason, address = ""): void {
    this.record(conn, { protocol, host, port, address, allowed: false, reason });
    const status = reason === "connect_failed" ? 502 : 403;
    const body = `egress denied: ${reason} (${host}:${port})\n`;
    conn.client.end(
      `HTTP/1.1 ${status} ${status === 403 ? "Forbidden" : "Bad Gateway"}\r\nX-Egress-Denied: ${reason}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }

  private record(
    { sandboxId, entry, started }: Conn,
    e: Dest & { address: string; allowed: boolean; reason: string; egressBytes?: number; ingressBytes?: number },
  ): void {
    entry.recording++;
    void entry.ready.then(() => {
      const event: NetworkEventRecord = {
        sandboxId,
        seq: ++entry.seq,
        at: new Date(Date.now() - (performance.now() - started)),
        host: e.host.slice(0, 253),
        port: e.port,
        address: e.address,
        allowed: e.allowed,
        reason: e.reason,
        protocol: e.protocol,
        egressBytes: e.egressBytes ?? 0,
        ingressBytes: e.ingressBytes ?? 0,
        durationMs: Math.max(0, performance.now() - started),
      };
      if (!e.allowed) this.log?.info({ sandboxId, host: event.host, port: e.port, reason: e.reason }, "egress denied");
      for (const l of this.listeners) l(event);
      if (event.seq > this.limits.maxEventsPerSandbox) {
        if (!entry.eventsCapped) this.log?.warn({ sandboxId }, "egress events no longer stored for this sandbox");
        entry.eventsCapped = true;
        entry.recording--;
        return;
      }
      this.options.events
        .append(event)
        .catch((err) => this.log?.error({ err, sandboxId }, "recording a network event failed"))
        .finally(() => entry.recording--);
    });
  }
}

/** The SOCKS5 reply code of each refusal (RFC 1928 §6). */
const SOCKS_REFUSALS: Record<DenyReason, number> = {
  not_allowed: 2,
  private_address: 2,
  host_service: 2,
  resolve_failed: 4,
  connect_failed: 5,
  bad_request: 7,
};

function socksReply(code: number): Buffer {
  return Buffer.from([5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
}
