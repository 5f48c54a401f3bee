import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import type { Figure, PeerResult } from "../figure.ts";
import { GrpcLoadClient } from "../grpc-load-client.ts";
import { authLoadClient } from "../identity-client.ts";
import { repeat, saturate } from "../loop.ts";
import { GRPC_JS } from "../peers/grpc-js-server.ts";
import { OWNER } from "../stack.ts";
import { fmtMs, fmtRate, lat, now, type Summary, summarize } from "../stats.ts";

const CONCURRENCY = 32;

/**
 * The pause before each ExecCommand sample. Both servers run the same driver,
 * whose cleanup after an exec (the exec's cgroups removed, the next spare
 * helper child made and moved into its cgroups: p50 1.2, p97 12, max 31 ms
 * of kernel time on this machine's six cgroup v1 hierarchies) ran during the
 * other server's next sample: 292 of 300 of ours held the peer's, so the
 * tail compared the driver's cleanup, not the servers (packages/bench/ANALYSIS.md).
 * Each sample now starts once the previous one's cleanup is over; the
 * driver's own cost stays in exec-round-trip and density.
 */
const EXEC_SETTLE_MS = 30;

/** Ours relative to the peer as a speed: > 1 is faster (throughput ours/theirs, latency theirs/ours). */
const speed = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)}×` : "n/a");

/**
 * Our gRPC server (@platform/rpc on connect-node) against grpc-js hosting
 * the very same implementations (src/peers/grpc-js-server.ts): identity's
 * AuthService (VerifyToken, unary) and compute's ComputeService
 * (ExecCommand, server streaming), each peer in a process of its own with
 * the same mutual TLS, driven by the same load client, ours and the peer's
 * windows alternated.
 */
export const grpcJsPeer: Figure = {
  id: "grpc-js-peer",
  title: "our gRPC server against grpc-js serving the same implementations",
  goal: "≥ 1.0× grpc-js on unary (VerifyToken) and on streaming (ExecCommand), throughput and latency",
  fullTimeoutMs: 300_000,
  // It starts two processes of its own (the peers), 5-20 s each on this shared machine.
  quickTimeoutMs: 120_000,
  async run(stack, size) {
    const quick = size === "quick";
    const tls = await stack.tls("agents");
    const peers: PeerResult[] = [];

    // Unary: VerifyToken of one token, as agents re-verifies a session's.
    const identity = await stack.identity();
    // Quick (the smoke run): the compute peer starts while the unary part runs, to save its start-up;
    // a full run starts it after, so it does not share the cores with the unary windows.
    const early = quick ? stack.grpcJsPeer("compute") : undefined;
    early?.catch(() => {});
    const peerIdentity = await stack.grpcJsPeer("identity");
    const unary = {
      ours: { ops: 0, seconds: 0, lat: [] as number[] },
      theirs: { ops: 0, seconds: 0, lat: [] as number[] },
    };
    const { access_token: token } = await stack.login();
    // The peer's own login (on PGlite it has a database of its own; on PostgreSQL it is the same one).
    const peerToken = await login(peerIdentity.urls.rest!);
    const ours = authLoadClient(identity.urls.grpc!, tls);
    const theirs = authLoadClient(peerIdentity.urls.grpc!, tls);
    try {
      const verify = (client: typeof ours, t: string, samples?: number[]) => async () => {
        const t0 = now();
        const res = await client.verifyToken(t);
        if (!res.context?.userId) throw new Error("VerifyToken returned no context");
        samples?.push(Number(now() - t0));
      };
      await saturate(CONCURRENCY, 300, verify(ours, token));
      await saturate(CONCURRENCY, 300, verify(theirs, peerToken));
      const windowMs = quick ? 300 : 3000;
      for (let i = 0; i < (quick ? 1 : 4); i++) {
        for (const [side, client, t] of [
          [unary.ours, ours, token],
          [unary.theirs, theirs, peerToken],
        ] as const) {
          const r = await saturate(CONCURRENCY, windowMs, verify(client, t));
          side.ops += r.ops;
          side.seconds += r.seconds;
          // Latency one call at a time (under saturation it is only the queue).
          await saturate(1, windowMs / 3, verify(client, t, side.lat));
        }
      }
    } finally {
      await ours.close();
      await theirs.close();
      await peerIdentity.stop();
    }
    const oursRate = unary.ours.ops / unary.ours.seconds;
    const theirRate = unary.theirs.ops / unary.theirs.seconds;
    const uo = summarize(unary.ours.lat);
    const ut = summarize(unary.theirs.lat);
    peers.push(
      {
        peer: `${GRPC_JS}, same AuthService implementation: VerifyToken throughput (${CONCURRENCY} in flight)`,
        theirs: fmtRate(theirRate, "calls/s"),
        ours: fmtRate(oursRate, "calls/s"),
        ratio: speed(oursRate / theirRate),
        goal: "≥ 1.0×",
        met: oursRate >= theirRate,
      },
      {
        peer: `${GRPC_JS}, same AuthService implementation: VerifyToken latency (1 in flight)`,
        theirs: lat(ut),
        ours: lat(uo),
        ratio: `p50 ${speed(ut.p50 / uo.p50)}, p99 ${speed(ut.p99 / uo.p99)}`,
        goal: "≥ 1.0× (its latency / ours)",
        met: uo.p50 <= ut.p50 && uo.p99 <= ut.p99,
      },
    );

    // Streaming: ExecCommand on a ready sandbox of each server's own driver.
    const compute = await stack.compute();
    const peerCompute = await (early ?? stack.grpcJsPeer("compute"));
    const sides = [
      {
        client: new GrpcLoadClient(compute.urls.grpc!, tls, { wideWindows: true }),
        lat: [] as number[],
        ns: 0,
        bytes: 0,
      },
      {
        client: new GrpcLoadClient(peerCompute.urls.grpc!, tls, { wideWindows: true }),
        lat: [] as number[],
        ns: 0,
        bytes: 0,
      },
    ];
    const ids: string[] = [];
    const bytes = quick ? 4 << 20 : 32 << 20;
    let execs = 0;
    let rounds = 0;
    try {
      for (const side of sides) {
        const { sandboxId } = await side.client.unary(ComputeService.method.createSandbox, {
          tenantId: randomUUID(),
          sessionId: randomUUID(),
        });
        ids.push(sandboxId);
        for (let i = 0; i < 5; i++) await exec(side.client, sandboxId, "/bin/true", []);
      }
      execs = await repeat({ n: quick ? 5 : 300, budgetMs: quick ? 5_000 : 30_000, minN: 5 }, async () => {
        for (const [i, side] of sides.entries()) {
          await sleep(EXEC_SETTLE_MS);
          side.lat.push((await exec(side.client, ids[i]!, "/bin/true", [])).ns);
        }
      });
      rounds = await repeat({ n: quick ? 1 : 4, budgetMs: quick ? 5_000 : 30_000 }, async () => {
        for (const [i, side] of sides.entries()) {
          const r = await exec(side.client, ids[i]!, "/usr/bin/head", ["-c", String(bytes), "/dev/zero"]);
          if (r.bytes !== bytes) throw new Error(`short read: ${r.bytes} of ${bytes}`);
          side.ns += r.ns;
          side.bytes += r.bytes;
        }
      });
    } finally {
      for (const [i, id] of ids.entries())
        await sides[i]!.client.unary(ComputeService.method.destroySandbox, { sandboxId: id }).catch(() => {});
      for (const side of sides) await side.client.close();
      await peerCompute.stop();
    }
    const so: Summary = summarize(sides[0]!.lat);
    const st: Summary = summarize(sides[1]!.lat);
    const mibs = (side: (typeof sides)[number]) => side.bytes / (side.ns / 1e9) / 2 ** 20;
    const oursMibs = mibs(sides[0]!);
    const theirMibs = mibs(sides[1]!);
    peers.push(
      {
        peer: `${GRPC_JS}, same ComputeService implementation: ExecCommand \`/bin/true\` round trip`,
        theirs: lat(st),
        ours: lat(so),
        ratio: `p50 ${speed(st.p50 / so.p50)}, p99 ${speed(st.p99 / so.p99)}`,
        goal: "≥ 1.0× (its latency / ours)",
        met: so.p50 <= st.p50 && so.p99 <= st.p99,
      },
      {
        peer: `${GRPC_JS}, same ComputeService implementation: ExecCommand stdout throughput`,
        theirs: fmtRate(theirMibs, "MiB/s"),
        ours: fmtRate(oursMibs, "MiB/s"),
        ratio: speed(oursMibs / theirMibs),
        goal: "≥ 1.0×",
        met: oursMibs >= theirMibs,
      },
    );

    return {
      baseline: `${GRPC_JS}: VerifyToken ${fmtRate(theirRate, "calls/s")}, p50 ${fmtMs(ut.p50)}; ExecCommand p50 ${fmtMs(st.p50)}, ${fmtRate(theirMibs, "MiB/s")}`,
      measured: `VerifyToken ${fmtRate(oursRate, "calls/s")}, p50 ${fmtMs(uo.p50)}; ExecCommand p50 ${fmtMs(so.p50)}, ${fmtRate(oursMibs, "MiB/s")}`,
      ratio: `unary ${speed(oursRate / theirRate)} throughput, ${speed(ut.p50 / uo.p50)} p50; streaming ${speed(st.p50 / so.p50)} p50, ${speed(oursMibs / theirMibs)} throughput`,
      met: peers.every((p) => p.met),
      notes: `Each peer is the service's own implementation (identity's authService(identity), compute's computeServiceImpl(domain) over its own local driver) registered on a @grpc/grpc-js Server through src/peers/grpc-js-server.ts (protobuf-es serializers, a Connect HandlerContext per call, the caller policy checked from the client certificate as our server does) in a process of its own with the same mutual TLS; ours is the service as it runs. Both driven by the bench's lean load client over one HTTP/2 connection each (1 MiB stream / 8 MiB connection windows for the streams). Unary: ${quick ? 1 : 4} alternating windows of ${quick ? 0.3 : 3} s with ${CONCURRENCY} calls in flight for throughput, then a third of that one call at a time for latency. Streaming: ${execs} alternating execs of /bin/true to the end of the stream (completed event and OK status), each ${EXEC_SETTLE_MS} ms after the one before so that no sample carries the driver's cleanup of the previous exec (either server's), then ${rounds} alternating rounds of \`head -c ${bytes >> 20}M\` of /dev/zero. Speeds are ours relative to the peer's: > 1.0× means ours is faster. Our server does more per call than the peer (request ids, access log, metrics, input guards): the ratio includes that.`,
      raw: {
        unary: { oursRate, theirRate, ours: uo, theirs: ut },
        streaming: { ours: so, theirs: st, oursMibs, theirMibs },
      },
      peers,
    };
  },
};

async function login(restUrl: string): Promise<string> {
  const res = await fetch(`${restUrl}/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(OWNER),
  });
  if (res.status !== 200) throw new Error(`login at the peer failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

async function exec(
  client: GrpcLoadClient,
  sandboxId: string,
  command: string,
  args: string[],
): Promise<{ ns: number; bytes: number }> {
  const t0 = now();
  let bytes = 0;
  let exitCode = Number.NaN;
  await client.serverStream(ComputeService.method.execCommand, { sandboxId, command, args }, (ev) => {
    if (ev.event.case === "stdout") bytes += ev.event.value.data.length;
    else if (ev.event.case === "completed") exitCode = ev.event.value.exitCode;
  });
  const ns = Number(now() - t0);
  if (exitCode !== 0) throw new Error(`${command} exited with ${exitCode} in the sandbox`);
  return { ns, bytes };
}
