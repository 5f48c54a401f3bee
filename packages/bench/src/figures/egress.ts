import { execFile, execFileSync } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import {
  createResolver,
  EgressProxy,
  listenInNetns,
  MemoryNetworkEventStore,
  SANDBOX_PROXY_PORT,
  validateNetworkPolicy,
} from "@platform/compute";
import { createIsolatedNetns, createNetworkWorld } from "@platform/compute/testing";
import type { Figure } from "../figure.ts";
import { processesCpuMs } from "../host/proc-cpu.ts";
import { ratio } from "../loop.ts";
import { fmtMs, lat, summarize } from "../stats.ts";

/** CPU time of this process's splice relay children (µs): the proxy's work that process.cpuUsage() does not see. */
function relayCpuUs(): { user: number; system: number } {
  const ms = processesCpuMs((s) => s.comm.startsWith("splice-relay-") && s.parent === process.pid);
  return { user: ms.user * 1000, system: ms.system * 1000 };
}

/**
 * Issue 21's numbers for the egress proxy, between the same two network
 * namespaces: a client namespace like a sandbox's (the proxy in this
 * process accepting on a listener made there, 127.0.0.1:3128, then a veth
 * pair to the world from the host) and, for the baseline, the same
 * client namespace with a veth pair of its own straight to the world
 * namespace. curl in the client namespace, interleaved: direct, then
 * through the proxy (CONNECT, as HTTPS clients use it).
 * - throughput: a download of N MiB, curl's own speed;
 * - connect latency: `GET /` (a 21-byte answer), curl's time to the first
 *   response byte (a new connection each time); the proxy's added p50 is the
 *   difference of the p50s.
 */
export const egress: Figure = {
  id: "egress",
  title: "sandbox egress proxy: throughput and added connect latency",
  goal: "throughput through the proxy ≥ 50 % of direct; added connect latency p50 ≤ 2 ms",
  fullTimeoutMs: 300_000,
  async run(_stack, size) {
    const world = await createNetworkWorld(["bench.test"]);
    const client = createIsolatedNetns();
    const tag = randomBytes(3).toString("hex");
    const clientIf = `ebc${tag}`;
    const worldIf = `ebw${tag}`;
    const m = 1 + ((randomBytes(1)[0] as number) % 254);
    const proxy = new EgressProxy({
      resolver: createResolver({ hosts: new Map([["bench.test", [world.worldAddress]]]) }),
      protectedPorts: [5432],
      events: new MemoryNetworkEventStore(),
      // As compute runs it (COMPUTE_EGRESS_SPLICE_RELAY, on by default; `0` measures Node's relay).
      spliceRelay: process.env.COMPUTE_EGRESS_SPLICE_RELAY !== "0",
    });
    try {
      // The direct path: the client namespace's own link to the world (a second address there).
      const ip = (...a: string[]) => execFileSync("ip", a, { stdio: ["ignore", "ignore", "pipe"] });
      ip("link", "add", clientIf, "type", "veth", "peer", "name", worldIf);
      ip("link", "set", clientIf, "netns", client.netns);
      ip("link", "set", worldIf, "netns", world.netns);
      ip("-n", client.netns, "addr", "add", `198.19.${m}.1/30`, "dev", clientIf);
      ip("-n", world.netns, "addr", "add", `198.19.${m}.2/30`, "dev", worldIf);
      ip("-n", client.netns, "link", "set", clientIf, "up");
      ip("-n", world.netns, "link", "set", worldIf, "up");
      const sandboxId = randomUUID();
      const listener = await listenInNetns({ netns: client.path, host: "127.0.0.1", port: SANDBOX_PROXY_PORT });
      await proxy.attach(sandboxId, validateNetworkPolicy({ allowedDomains: ["bench.test"] }), listener);
      const curl = (args: string[]) =>
        new Promise<string>((resolve, reject) =>
          execFile(
            "ip",
            ["netns", "exec", client.netns, "curl", "-sS", "--max-time", "120", ...args],
            { timeout: 130_000 },
            (err, stdout, stderr) => (err ? reject(new Error(`${err.message}: ${stderr}`)) : resolve(stdout)),
          ),
        );
      const direct = [`http://198.19.${m}.2`];
      const proxied = ["--proxytunnel", "-x", "http://127.0.0.1:3128", "http://bench.test"];
      const url = (base: string[], path: string) => [...base.slice(0, -1), `${base.at(-1)}${path}`];

      const mib = size === "quick" ? 16 : 256;
      const rounds = size === "quick" ? 1 : 5;
      const directMBps: number[] = [];
      const proxyMBps: number[] = [];
      // The proxy relays in this process: its CPU per MiB says whether the relay or the two shared
      // cores (curl, the server and the relay each want one) bound the rate.
      const proxyCpuMsPerMiB: number[] = [];
      let proxySystemShare = 0;
      for (let i = 0; i < rounds + 1; i++) {
        const get = (base: string[]) =>
          curl(["-o", "/dev/null", "-w", "%{speed_download}", ...url(base, `/bytes/${mib * 1024 * 1024}`)]).then(
            (s) => Number(s) / 1024 / 1024,
          );
        const d = await get(direct);
        const cpu = process.cpuUsage();
        const relayBefore = relayCpuUs();
        const p = await get(proxied);
        const own = process.cpuUsage(cpu);
        const relay = relayCpuUs();
        const used = {
          user: own.user + relay.user - relayBefore.user,
          system: own.system + relay.system - relayBefore.system,
        };
        if (i === 0) continue; // warm-up
        directMBps.push(d);
        proxyMBps.push(p);
        proxyCpuMsPerMiB.push((used.user + used.system) / 1000 / mib);
        proxySystemShare += used.system / (used.user + used.system) / rounds;
      }
      const relaying = (await proxy.relaysInKernel())
        ? "bytes moved by the relay"
        : "no relay here: bytes moved by Node";
      const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

      const n = size === "quick" ? 10 : 200;
      const directTtfb: number[] = [];
      const proxyTtfb: number[] = [];
      for (let i = 0; i < n + 5; i++) {
        const t = async (base: string[]) =>
          Number(await curl(["-o", "/dev/null", "-w", "%{time_starttransfer}", ...url(base, "/")])) * 1e9;
        const d = await t(direct);
        const p = await t(proxied);
        if (i < 5) continue;
        directTtfb.push(d);
        proxyTtfb.push(p);
      }
      const dl = summarize(directTtfb);
      const pl = summarize(proxyTtfb);
      const throughputRatio = med(proxyMBps) / med(directMBps);
      const added = pl.p50 - dl.p50;
      return {
        baseline: `direct: ${med(directMBps).toFixed(0)} MiB/s (median of ${rounds} × ${mib} MiB); first byte of GET / ${lat(dl)}`,
        measured: `through the proxy: ${med(proxyMBps).toFixed(0)} MiB/s; first byte ${lat(pl)}`,
        ratio: `throughput ${(throughputRatio * 100).toFixed(0)} %; added p50 ${fmtMs(added)} (${ratio(pl.p50, dl.p50)})`,
        met: throughputRatio >= 0.5 && added <= 2,
        notes: `Client namespace → world namespace, interleaved. Through the proxy: curl → the proxy's listener made in the client namespace (accepted by the Node proxy itself, no forwarder) → the proxy (CONNECT, policy check, fixed-answer resolver) → veth → server. Direct: curl → its own veth pair → the same server. Speeds per round direct ${directMBps.map((x) => x.toFixed(0)).join("/")} MiB/s, proxy ${proxyMBps.map((x) => x.toFixed(0)).join("/")} MiB/s; the proxy's own CPU (this process and its splice relay: ${relaying}) ${proxyCpuMsPerMiB.map((x) => x.toFixed(2)).join("/")} ms per MiB relayed, ${(proxySystemShare * 100).toFixed(0)} % of it in the kernel (one core's worth would relay ${(1000 / med(proxyCpuMsPerMiB)).toFixed(0)} MiB/s).`,
        raw: {
          directMBps,
          proxyMBps,
          proxyCpuMsPerMiB,
          directTtfb: dl,
          proxyTtfb: pl,
          addedP50Ms: added,
          throughputRatio,
        },
      };
    } finally {
      await proxy.close();
      client.close();
      await world.close();
    }
  },
};
