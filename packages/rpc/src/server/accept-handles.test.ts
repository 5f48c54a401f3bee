// ServerOptions.acceptHandles (issue 15 item 5): Node 20 accepts one
// connection per listening descriptor per event-loop turn, so a burst of new
// connections to a busy service waits turn after turn in the kernel's listen
// queue (agents' /livez probes waited up to 5 s so under the mixed-load bench
// figure). With more descriptors of the socket, a turn takes in as many.
// Counted in loop turns, not milliseconds: the same on a busy machine.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import * as net from "node:net";
import { test } from "node:test";
import { testServer } from "../testing/fixture.ts";

const BURST = 64;

/**
 * Opens BURST connections at once (their handshakes complete in the kernel
 * before the next turn), sends GET /livez on each and counts the event-loop
 * turns until every one has its answer.
 */
async function turnsToAnswerBurst(port: number): Promise<{ turns: number; ok: number }> {
  let answered = 0;
  let ok = 0;
  const sockets = Array.from({ length: BURST }, () => {
    const s = net.connect(port, "127.0.0.1", () =>
      s.write("GET /livez HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"),
    );
    let head = "";
    s.on("data", (d: Buffer) => {
      head += d.toString("latin1");
    });
    s.on("close", () => {
      answered++;
      if (head.startsWith("HTTP/1.1 200")) ok++;
    });
    s.on("error", () => {});
    return s;
  });
  let turns = 0;
  while (answered < BURST && turns < 10_000) {
    await new Promise((r) => setImmediate(r));
    turns++;
  }
  for (const s of sockets) s.destroy();
  return { turns, ok };
}

/**
 * This process's children that are descriptor-copying helpers (`node -e`), which must be gone. Only
 * those: a fresh clone's first run has tsx's esbuild service as a child too (a CI run failed so).
 */
function children(): string[] {
  const cmdline = (pid: string) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    } catch {
      return [];
    }
  };
  return readdirSync("/proc/self/task")
    .flatMap((tid) => readFileSync(`/proc/self/task/${tid}/children`, "utf8").trim().split(/\s+/).filter(Boolean))
    .filter((pid) => cmdline(pid)[1] === "-e");
}

test("16 accept handles take a burst of 64 connections in a few loop turns, one handle in one a connection", async (t) => {
  const one = testServer();
  const many = testServer({ acceptHandles: 16 });
  try {
    const onePort = (await one.server.listen()).port;
    const manyPort = (await many.server.listen()).port;
    const single = await turnsToAnswerBurst(onePort);
    const multi = await turnsToAnswerBurst(manyPort);
    t.diagnostic(`turns to answer ${BURST} connections: one handle ${single.turns}, 16 handles ${multi.turns}`);
    assert.equal(single.ok, BURST);
    assert.equal(multi.ok, BURST);
    // One descriptor: one accept a turn (libuv ≥ 1.45), so at least BURST turns. Sixteen: BURST / 16 turns
    // of accepting plus the few each connection needs to be read and answered.
    assert.ok(single.turns >= BURST, `one handle answered ${BURST} connections in ${single.turns} turns`);
    assert.ok(multi.turns <= BURST / 4, `16 handles answered ${BURST} connections in ${multi.turns} turns`);
    assert.deepEqual(children(), [], "the helper that copied the descriptors has exited");
  } finally {
    await Promise.all([one.server.close(), many.server.close()]);
  }
});

test("closing the server closes every descriptor of its socket: the port refuses connections", async () => {
  const { server } = testServer({ acceptHandles: 4 });
  const { port } = await server.listen();
  await server.close();
  const refused = await new Promise<string>((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => {
      s.destroy();
      resolve("connected");
    });
    s.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
  });
  assert.equal(refused, "ECONNREFUSED");
});
