import assert from "node:assert/strict";
import * as net from "node:net";
import { after, before, describe, test } from "node:test";
import * as tls from "node:tls";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import type { NodeRequest, NodeResponse } from "../http/node-io.ts";
import { testServer } from "../testing/fixture.ts";
import { loadServiceTls } from "../tls/service-tls.ts";

/**
 * An HTTP/1.1 response whose headers leave first and whose small body writes
 * follow a turn later each (an SSE stream's first events): with Nagle's
 * algorithm on the accepted socket, each write after the first waits for the
 * client's ACK of the one before, which Linux delays by ~40 ms.
 */
const trickle = async (req: NodeRequest, res: NodeResponse) => {
  if (req.url !== "/trickle") return false;
  res.writeHead(200, { "content-type": "text/event-stream" });
  // One signature of write for both of NodeResponse's members.
  const out = res as unknown as { write(chunk: string): boolean; flushHeaders?: () => void };
  out.flushHeaders?.();
  for (const data of ["a", "b", "c"]) {
    await new Promise((r) => setImmediate(r));
    out.write(`data: ${data}\n\n`);
  }
  await new Promise((r) => setImmediate(r));
  res.end();
  return true;
};

/**
 * Milliseconds from the first byte of each response to its last, for four
 * requests one after another on `socket` (a kept-alive connection: past its
 * first segments the client's ACKs are delayed), the first left out.
 */
async function timeResponses(socket: net.Socket): Promise<number[]> {
  const times: number[] = [];
  let first = 0;
  let body = "";
  let done: (() => void) | undefined;
  socket.on("data", (chunk: Buffer) => {
    first ||= performance.now();
    body += chunk.toString();
    if (body.endsWith("0\r\n\r\n")) {
      times.push(performance.now() - first);
      first = 0;
      body = "";
      done?.();
    }
  });
  for (let i = 0; i < 4; i++) {
    const ended = new Promise<void>((resolve, reject) => {
      done = resolve;
      socket.once("error", reject);
    });
    socket.write("GET /trickle HTTP/1.1\r\nhost: x\r\n\r\n");
    await ended;
  }
  socket.destroy();
  return times.slice(1);
}

let pki: TestPki;
before(async () => {
  pki = await makeTestPki(["compute", "agents"]);
});
after(() => pki.remove());

describe("accepted connections write without Nagle's delay", () => {
  test("plaintext: three small writes after the headers arrive within a few ms, not ~40 ms apart", async () => {
    const { server } = testServer({ restOnly: true, unrouted: trickle });
    const { port } = await server.listen();
    try {
      // The best of three: one slow turn on a busy machine is not the ~40 ms of a delayed ACK.
      const times = await timeResponses(net.connect(port, "127.0.0.1"));
      assert.ok(Math.min(...times) < 30, `response spread over ${times.map((t) => t.toFixed(1)).join(", ")} ms`);
    } finally {
      await server.close();
    }
  });

  test("mutual TLS: the same", async () => {
    const { server } = testServer({
      restOnly: true,
      unrouted: trickle,
      internal: { tls: loadServiceTls(pki.env("compute")), callers: {} },
    });
    const { port } = await server.listen();
    const client = loadServiceTls(pki.env("agents"));
    try {
      const socket = tls.connect({
        port,
        host: "127.0.0.1",
        ca: client.ca,
        cert: client.cert,
        key: client.key,
        servername: "compute",
        ALPNProtocols: ["http/1.1"],
        checkServerIdentity: () => undefined,
      });
      await new Promise((r, j) => socket.once("secureConnect", r).once("error", j));
      const times = await timeResponses(socket);
      assert.ok(Math.min(...times) < 30, `response spread over ${times.map((t) => t.toFixed(1)).join(", ")} ms`);
    } finally {
      await server.close();
    }
  });
});
