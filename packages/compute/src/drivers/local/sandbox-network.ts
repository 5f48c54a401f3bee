import type { Server } from "node:net";
import type { NetworkPolicy } from "@platform/network-policy";
import type { Logger } from "pino";
import { listenInNetns } from "../../egress/netns-listener.ts";
import type { EgressProxy } from "../../egress/proxy.ts";
import { proxyEnv, SANDBOX_PROXY_PORT } from "../../egress/proxy-env.ts";

interface Wiring {
  /** Undefined: no network (the proxy refuses everything; a sandbox never given a policy has no listener at all). */
  policy?: NetworkPolicy;
  /** Ever given a policy: its execs get the proxy variables. */
  wired: boolean;
  listener?: Server;
  /** The init whose network namespace the listener is in. */
  forInit?: number;
  starting?: Promise<void>;
}

/**
 * A local sandbox's way out: its own network namespace keeps only loopback,
 * and for a sandbox with a network policy the egress proxy on the host,
 * which enforces the policy, accepts on a listener made in that namespace
 * (127.0.0.1:3128 there). The listener is made before the first exec that
 * needs it (and again after a release or a restart of the service gave the
 * sandbox a new init), so warm adoption, resume and recovery need nothing
 * of their own. A sandbox without a policy has no listener and no
 * variables: as before.
 */
export class SandboxNetwork {
  private readonly sandboxes = new Map<string, Wiring>();

  constructor(
    private readonly egress: EgressProxy,
    private readonly log?: Logger,
  ) {}

  setPolicy(sandboxId: string, policy: NetworkPolicy | undefined): void {
    const w = this.sandboxes.get(sandboxId) ?? { wired: false };
    w.policy = policy;
    if (policy) w.wired = true;
    this.sandboxes.set(sandboxId, w);
    this.egress.setPolicy(sandboxId, policy);
  }

  /**
   * Before an exec: the proxy listens in the namespace of the sandbox's current init, and the
   * environment the command gets on top of the base one ({} without a policy).
   */
  async prepare(sandboxId: string, initPid: number): Promise<Record<string, string>> {
    const w = this.sandboxes.get(sandboxId);
    if (!w?.wired) return {};
    while (w.starting) await w.starting;
    if (!w.listener?.listening || w.forInit !== initPid) {
      w.starting = this.start(sandboxId, w, initPid).finally(() => {
        w.starting = undefined;
      });
      await w.starting;
    }
    return proxyEnv();
  }

  private async start(sandboxId: string, w: Wiring, initPid: number): Promise<void> {
    await this.stop(sandboxId);
    let listener: Server | undefined;
    try {
      listener = await listenInNetns({ netns: `/proc/${initPid}/ns/net`, host: "127.0.0.1", port: SANDBOX_PROXY_PORT });
      await this.egress.attach(sandboxId, w.policy, listener);
      w.listener = listener;
      w.forInit = initPid;
    } catch (err) {
      // Not served: closed, or it would keep the sandbox's namespace alive.
      if (listener && w.listener !== listener) listener.close();
      // Fail closed: the command runs with the variables and finds nothing listening.
      this.log?.error({ err, sandboxId }, "listening for the sandbox's egress in its namespace failed");
    }
  }

  /** Bytes through the proxy since the sandbox was created. */
  counters(sandboxId: string): { egressBytes: number; ingressBytes: number } {
    return this.egress.counters(sandboxId);
  }

  /** Waits (bounded) for the sandbox's connections to end, so an exec's usage includes them. */
  settled(sandboxId: string, timeoutMs: number): Promise<void> {
    return this.egress.settled(sandboxId, timeoutMs);
  }

  /** Its processes ended (release, failure): the listener goes (it would keep the namespace); the policy stays for a resume. */
  async stop(sandboxId: string): Promise<void> {
    const w = this.sandboxes.get(sandboxId);
    if (!w?.listener) return;
    w.listener = undefined;
    w.forInit = undefined;
    await this.egress.detach(sandboxId);
  }

  /** Destroyed: listener and counters go (the totals are in its record by then). */
  async forget(sandboxId: string): Promise<void> {
    await this.stop(sandboxId);
    this.sandboxes.delete(sandboxId);
    await this.egress.forget(sandboxId);
  }

  /** Every listener ends (the service stops). */
  async close(): Promise<void> {
    await Promise.all([...this.sandboxes.keys()].map((id) => this.stop(id)));
  }
}
