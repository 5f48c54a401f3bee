import type { ChildProcess } from "node:child_process";
import type { NetworkPolicy } from "@platform/network-policy";
import type { Logger } from "pino";
import { proxyEnv, startForwarder, stopForwarder } from "../../egress/forwarder.ts";
import type { EgressProxy } from "../../egress/proxy.ts";

interface Wiring {
  /** Undefined: no network (the proxy refuses everything; a sandbox never given a policy has no forwarder at all). */
  policy?: NetworkPolicy;
  /** Ever given a policy: its execs get the proxy variables. */
  wired: boolean;
  forwarder?: ChildProcess;
  /** The init whose network namespace the forwarder is in. */
  forInit?: number;
  starting?: Promise<void>;
}

/**
 * A local sandbox's way out: its own network namespace keeps only loopback,
 * and for a sandbox with a network policy a forwarder in that namespace
 * relays 127.0.0.1:3128 to the sandbox's socket of the egress proxy on the
 * host, which enforces the policy. The forwarder is started before the
 * first exec that needs it (and again after a release or a restart of the
 * service gave the sandbox a new init), so warm adoption, resume and
 * recovery need nothing of their own. A sandbox without a policy has no
 * forwarder, no socket and no variables: as before.
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
   * Before an exec: the forwarder of the sandbox's current init runs, and the
   * environment the command gets on top of the base one ({} without a policy).
   */
  async prepare(sandboxId: string, initPid: number): Promise<Record<string, string>> {
    const w = this.sandboxes.get(sandboxId);
    if (!w?.wired) return {};
    while (w.starting) await w.starting;
    const alive = w.forwarder && w.forwarder.exitCode === null && w.forwarder.signalCode === null;
    if (!alive || w.forInit !== initPid) {
      w.starting = this.start(sandboxId, w, initPid).finally(() => {
        w.starting = undefined;
      });
      await w.starting;
    }
    return proxyEnv();
  }

  private async start(sandboxId: string, w: Wiring, initPid: number): Promise<void> {
    await stopForwarder(w.forwarder);
    w.forwarder = undefined;
    const socketPath = await this.egress.attach(sandboxId, w.policy);
    try {
      w.forwarder = await startForwarder({ netns: `/proc/${initPid}/ns/net`, socketPath });
      w.forInit = initPid;
    } catch (err) {
      // Fail closed: the command runs with the variables and finds nothing listening.
      this.log?.error({ err, sandboxId }, "starting the sandbox's egress forwarder failed");
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

  /** Its processes ended (release, failure): the forwarder goes; the policy stays for a resume. */
  async stop(sandboxId: string): Promise<void> {
    const w = this.sandboxes.get(sandboxId);
    if (!w?.forwarder) return;
    const f = w.forwarder;
    w.forwarder = undefined;
    w.forInit = undefined;
    await stopForwarder(f);
  }

  /** Destroyed: forwarder, socket and counters go (the totals are in its record by then). */
  async forget(sandboxId: string): Promise<void> {
    await this.stop(sandboxId);
    this.sandboxes.delete(sandboxId);
    await this.egress.forget(sandboxId);
  }

  /** Every forwarder ends (the service stops; they would die with it anyway). */
  async close(): Promise<void> {
    await Promise.all([...this.sandboxes.keys()].map((id) => this.stop(id)));
  }
}
