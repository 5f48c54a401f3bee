// The egress proxy against an outside world made by the test (a network
// namespace behind a veth pair, HTTP and HTTPS servers in it) and a client
// namespace like a sandbox's (only loopback) whose one way out is the
// proxy's listener made in it. No traffic leaves the machine.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { validateNetworkPolicy } from "@platform/network-policy";
import { MemoryNetworkEventStore } from "../store/network-event-store.ts";
import { createIsolatedNetns, createNetworkWorld, type NetworkWorld } from "../testing/network-world.ts";
import { listenInNetns } from "./netns-listener.ts";
import { EgressProxy } from "./proxy.ts";
import { proxyEnv, SANDBOX_PROXY_PORT } from "./proxy-env.ts";
import { createResolver } from "./resolver.ts";

// Every case runs with the splice relay (compute's default) and with Node's own relay (its fallback).
for (const spliceRelay of [true, false]) {
  describe(spliceRelay ? "relayed by splice(2) in the relay process" : "relayed by Node", () => {
    let world: NetworkWorld;
    let client: ReturnType<typeof createIsolatedNetns>;
    let proxy: EgressProxy;
    const events = new MemoryNetworkEventStore();
    const sandboxId = randomUUID();
    const PROTECTED = [5432, 50051];

    function run(
      cmd: string[],
      env: Record<string, string> = {},
    ): Promise<{ code: number; stdout: string; stderr: string }> {
      return new Promise((resolve) => {
        execFile(
          "ip",
          [
            "netns",
            "exec",
            client.netns,
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
            ...cmd,
          ],
          { maxBuffer: 1 << 20, timeout: 60_000 },
          (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
        );
      });
    }

    const env = proxyEnv();
    const curl = (...args: string[]) => run(["curl", "-sS", "--max-time", "20", ...args], env);
    const lastEvent = async () => {
      // Connections are recorded when they end, which the proxy may see just after curl exits.
      await proxy.settled(sandboxId);
      return (await events.list(sandboxId, 0, 10_000)).at(-1);
    };

    before(async () => {
      world = await createNetworkWorld(["allowed.test", "denied.test", "api.wild.test"]);
      client = createIsolatedNetns();
      const hosts = new Map<string, string[]>([
        ["allowed.test", [world.worldAddress]],
        ["denied.test", [world.worldAddress]],
        ["api.wild.test", [world.worldAddress]],
        ["loop.test", ["127.0.0.1"]],
        ["hostsvc.test", [world.hostAddress]],
      ]);
      proxy = new EgressProxy({ resolver: createResolver({ hosts }), protectedPorts: PROTECTED, events, spliceRelay });
      assert.equal(
        await proxy.relaysInKernel(),
        spliceRelay,
        "the splice relay runs on this machine (root, kernel >= 5.6)",
      );
      await proxy.attach(
        sandboxId,
        validateNetworkPolicy({ allowedDomains: ["allowed.test", "*.wild.test", "loop.test", "hostsvc.test"] }),
        await listenInNetns({ netns: client.path, host: "127.0.0.1", port: SANDBOX_PROXY_PORT }),
      );
    });

    after(async () => {
      await proxy?.close();
      client?.close();
      await world?.close();
    });

    test("an allowed name is reachable by curl (HTTP and HTTPS) and Python's urllib through the proxy variables", async () => {
      const http = await curl("http://allowed.test/");
      assert.equal(http.stdout, "hello from the world\n", http.stderr);
      const https = await curl("--cacert", world.caFile, "https://allowed.test/");
      assert.equal(https.stdout, "hello from the world\n", https.stderr);
      assert.equal((await lastEvent())?.protocol, "connect");
      const wild = await curl("--cacert", world.caFile, "https://api.wild.test/");
      assert.equal(wild.stdout, "hello from the world\n", wild.stderr);
      const py = await run(
        [
          "/usr/bin/python3",
          "-c",
          `import ssl, urllib.request
ctx = ssl.create_default_context(cafile="${world.caFile}")
print(urllib.request.urlopen("https://allowed.test/", context=ctx).read().decode(), end="")
print(urllib.request.urlopen("http://allowed.test/").read().decode(), end="")`,
        ],
        env,
      );
      assert.equal(py.stdout, "hello from the world\nhello from the world\n", py.stderr);
      const socks = await run([
        "curl",
        "-sS",
        "--socks5-hostname",
        `127.0.0.1:${SANDBOX_PROXY_PORT}`,
        "http://allowed.test/",
      ]);
      assert.equal(socks.stdout, "hello from the world\n", socks.stderr);
      const e = await lastEvent();
      assert.equal(e?.protocol, "socks5");
      assert.equal(e?.allowed, true);
      assert.equal(e?.address, world.worldAddress);
      assert.ok((e?.ingressBytes ?? 0) > 20);
    });

    test("a denied name is refused (HTTP, CONNECT, SOCKS5) and logged with why", async () => {
      const http = await curl("-f", "http://denied.test/");
      assert.notEqual(http.code, 0);
      assert.equal((await lastEvent())?.reason, "not_allowed");
      const https = await curl("https://denied.test/");
      assert.notEqual(https.code, 0);
      assert.match(https.stderr, /403/);
      const e = await lastEvent();
      assert.deepEqual(
        [e?.host, e?.port, e?.allowed, e?.reason, e?.protocol],
        ["denied.test", 443, false, "not_allowed", "connect"],
      );
      assert.equal(e?.address, "", "a name the policy does not list is not even looked up");
      const socks = await run([
        "curl",
        "-sS",
        "--socks5-hostname",
        `127.0.0.1:${SANDBOX_PROXY_PORT}`,
        "http://denied.test/",
      ]);
      assert.notEqual(socks.code, 0);
      assert.equal((await lastEvent())?.protocol, "socks5");
      // An address literal is a destination like any other: not listed, not reached.
      assert.notEqual((await curl("-f", `http://${world.worldAddress}/`)).code, 0);
    });

    test("a connection ignoring the proxy gets nowhere: the namespace has only loopback", async () => {
      const direct = await run(["curl", "-sS", "--max-time", "5", "--noproxy", "*", `http://${world.worldAddress}/`]);
      assert.notEqual(direct.code, 0);
      assert.match(direct.stderr, /unreachable|Failed to connect|resolve/i);
    });

    test("a name resolving to loopback or to the host's services is refused, also with allow_all", async () => {
      await curl("-f", "http://loop.test/");
      assert.equal((await lastEvent())?.reason, "private_address");
      assert.equal((await lastEvent())?.address, "127.0.0.1");
      // The host's own address outside every special range, on a port no service is protected on: still the host.
      await curl("-f", "http://hostsvc.test:8081/");
      assert.deepEqual(
        [(await lastEvent())?.reason, (await lastEvent())?.address],
        ["private_address", world.hostAddress],
      );
      proxy.setPolicy(
        sandboxId,
        validateNetworkPolicy({ allowAll: true, allowedCidrs: [{ cidr: `${world.hostAddress}/32` }] }),
      );
      try {
        for (const target of [
          "http://loop.test/",
          "http://127.0.0.1:5432/",
          "http://[::1]:80/",
          "http://169.254.169.254/",
        ]) {
          const r = await curl("-f", target);
          assert.notEqual(r.code, 0, target);
          assert.equal((await lastEvent())?.reason, "private_address", target);
        }
        // The host's own address, allowed by an explicit /32, still never on a service port.
        for (const port of PROTECTED) {
          await curl("-f", `http://hostsvc.test:${port}/`);
          assert.equal((await lastEvent())?.reason, "host_service", String(port));
        }
      } finally {
        proxy.setPolicy(sandboxId, validateNetworkPolicy({ allowedDomains: ["allowed.test"] }));
      }
    });

    test("a policy update applies to the next connection", async () => {
      proxy.setPolicy(sandboxId, validateNetworkPolicy({ allowedDomains: ["denied.test"] }));
      assert.notEqual((await curl("-f", "http://allowed.test/")).code, 0);
      assert.equal((await curl("http://denied.test/")).stdout, "hello from the world\n");
      proxy.setPolicy(sandboxId, undefined);
      assert.notEqual((await curl("-f", "http://denied.test/")).code, 0);
      proxy.setPolicy(sandboxId, validateNetworkPolicy({ allowedDomains: ["allowed.test"] }));
      assert.equal((await curl("http://allowed.test/")).stdout, "hello from the world\n");
    });

    test("bytes are counted each way within 1 % on 100 MiB", async () => {
      const size = 100 * 1024 * 1024;
      const before = proxy.counters(sandboxId);
      const started = performance.now();
      const down = await curl("-o", "/dev/null", "-w", "%{size_download}", "http://allowed.test/bytes/" + size);
      const downMs = performance.now() - started;
      assert.equal(down.stdout, String(size), down.stderr);
      // Exact once the connection has ended (the splice relay reports running totals every 200 ms).
      await proxy.settled(sandboxId);
      const mid = proxy.counters(sandboxId);
      const ingress = mid.ingressBytes - before.ingressBytes;
      assert.ok(ingress >= size && ingress <= size * 1.01, `ingress ${ingress}`);
      const up = await run(
        ["/bin/sh", "-c", `head -c ${size} /dev/zero | curl -sS -T - http://allowed.test/upload`],
        env,
      );
      assert.equal(up.stdout, `received ${size}\n`, up.stderr);
      await proxy.settled(sandboxId);
      const egress = proxy.counters(sandboxId).egressBytes - mid.egressBytes;
      assert.ok(egress >= size && egress <= size * 1.01, `egress ${egress}`);
      const e = await lastEvent();
      assert.ok((e?.egressBytes ?? 0) >= size, "the connection's event carries its bytes");
      console.log(
        `100 MiB down through the proxy: ${downMs.toFixed(0)} ms; counted ingress ${ingress}, egress ${egress}`,
      );
    });

    test("an open connection's bytes are counted while they flow, not only when it ends", async () => {
      const size = 60 * 1024 * 1024;
      const before = proxy.counters(sandboxId).ingressBytes;
      let done = false;
      const download = curl("--limit-rate", "30M", "-o", "/dev/null", "http://allowed.test/bytes/" + size).finally(
        () => (done = true),
      );
      // Sampled while the transfer runs: one late timer on a loaded machine (a CI once read the
      // counter only after the whole 2 s transfer had ended) must not decide the case.
      const samples: number[] = [];
      while (!done) {
        await new Promise((r) => setTimeout(r, 100));
        if (!done) samples.push(proxy.counters(sandboxId).ingressBytes - before);
      }
      assert.equal((await download).code, 0);
      assert.ok(
        samples.some((n) => n > 4 * 1024 * 1024 && n < size),
        `counted while the 2 s transfer ran: ${samples.join(", ")}`,
      );
    });

    test("a detached sandbox's open connections end at once (its tunnels are closed, counted and recorded)", async () => {
      const size = 200 * 1024 * 1024;
      const download = curl(
        "--limit-rate",
        "20M",
        "-o",
        "/dev/null",
        "-w",
        "%{size_download}",
        `http://allowed.test/bytes/${size}`,
      );
      await new Promise((r) => setTimeout(r, 500));
      const detached = performance.now();
      await proxy.detach(sandboxId);
      const r = await download;
      const endedMs = performance.now() - detached;
      assert.notEqual(r.code, 0, "the transfer did not complete");
      assert.ok(endedMs < 3000, `curl saw its connection end ${endedMs.toFixed(0)} ms after the detach`);
      await proxy.settled(sandboxId);
      const e = await lastEvent();
      assert.ok(e?.allowed && e.ingressBytes > 0 && e.ingressBytes < size, `recorded ${e?.ingressBytes} bytes`);
      assert.ok(Number(r.stdout) <= e.ingressBytes, `curl got ${r.stdout}, the proxy counted ${e.ingressBytes}`);
      // Served again, for the file's other cases.
      await proxy.attach(
        sandboxId,
        validateNetworkPolicy({ allowedDomains: ["allowed.test"] }),
        await listenInNetns({ netns: client.path, host: "127.0.0.1", port: SANDBOX_PROXY_PORT }),
      );
    });
  });
}

test("the splice relay starts with the first tunnel and ends with the proxy: an idle proxy holds no process", async () => {
  const { readdirSync, readFileSync } = await import("node:fs");
  const relays = () =>
    readdirSync("/proc").filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        return stat.includes("(splice-relay-") && Number(fields[1]) === process.pid;
      } catch {
        return false;
      }
    }).length;
  const before = relays();
  const idle = new EgressProxy({
    resolver: createResolver({ hosts: new Map() }),
    protectedPorts: [],
    events: new MemoryNetworkEventStore(),
    spliceRelay: true,
  });
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(relays(), before, "no relay process before any tunnel");
  assert.equal(await idle.relaysInKernel(), true);
  assert.equal(relays(), before + 1);
  await idle.close();
  for (let i = 0; i < 50 && relays() > before; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(relays(), before, "the relay ends with the proxy");
});

test("a sandbox holds at most its share of the proxy: open connections, handshake time, stored events", async () => {
  const { connect, createServer } = await import("node:net");
  const store = new MemoryNetworkEventStore();
  const small = new EgressProxy({
    resolver: createResolver({ hosts: new Map() }),
    protectedPorts: [],
    events: store,
    limits: { maxConnectionsPerSandbox: 3, handshakeTimeoutMs: 8000, maxEventsPerSandbox: 2 },
  });
  const id = randomUUID();
  try {
    const listener = createServer();
    await new Promise<void>((r) => listener.listen(0, "127.0.0.1", r));
    const { port } = listener.address() as { port: number };
    await small.attach(id, validateNetworkPolicy({ allowedDomains: ["allowed.test"] }), listener);
    const open = () =>
      new Promise<import("node:net").Socket>((resolve, reject) => {
        const s = connect(port, "127.0.0.1", () => resolve(s));
        s.once("error", reject);
      });
    const closed = (s: import("node:net").Socket) =>
      new Promise<void>((r) => {
        s.once("close", () => r());
        s.resume(); // read what comes, so its end is seen
      });
    const idle = [await open(), await open(), await open()];
    const opened = performance.now();
    const extra = await open();
    await closed(extra); // the fourth is closed at once, long before the three reach their handshake time
    const extraMs = performance.now() - opened;
    assert.ok(extraMs < 4000, `the connection over the limit was served (closed after ${extraMs.toFixed(0)} ms)`);
    const t0 = performance.now();
    await Promise.all(idle.map(closed)); // silent ones are closed after the handshake time
    console.log(`idle connections closed after ${(performance.now() - t0).toFixed(0)} ms (limit 8000)`);
    // Refusals beyond the cap are still refused, but no longer stored.
    for (let i = 0; i < 4; i++) {
      const s = await open();
      s.write("CONNECT denied.test:443 HTTP/1.1\r\n\r\n");
      await closed(s);
    }
    await small.settled(id);
    assert.deepEqual(
      (await store.list(id, 0, 100)).map((e) => e.seq),
      [1, 2],
    );
  } finally {
    await small.close();
  }
});
