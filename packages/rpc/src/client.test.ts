import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LibraryService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { createServiceTransport } from "./client.ts";
import { HTTP2_CONNECTION_WINDOW, HTTP2_STREAM_WINDOW } from "./http2-windows.ts";
import { testServer } from "./testing/fixture.ts";

/** Records the grpc-accept-encoding every request offers. */
function encodingProbe() {
  const seen: (string | null)[] = [];
  const interceptor: Interceptor = (next) => async (req) => {
    seen.push(req.header.get("grpc-accept-encoding"));
    return next(req);
  };
  return { seen, interceptor };
}

describe("createServiceTransport", () => {
  const { server } = testServer();
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("does not offer to take compressed responses (a default gRPC client offers gzip)", async () => {
    const big = { text: "x".repeat(100), repeat: 200 };
    const control = encodingProbe();
    const plain = createClient(
      LibraryService,
      createGrpcTransport({ baseUrl: url, interceptors: [control.interceptor] }),
    );
    assert.equal((await plain.echo(big)).text.length, 20_000);
    assert.match(control.seen[0] ?? "", /gzip/);

    const probe = encodingProbe();
    const service = createClient(
      LibraryService,
      createServiceTransport({ baseUrl: url, interceptors: [probe.interceptor] }),
    );
    assert.equal((await service.echo(big)).text.length, 20_000);
    assert.deepEqual(probe.seen, [null]);
  });

  test("the server advertises the widened stream and connection windows", async () => {
    const session = http2.connect(url);
    try {
      await new Promise<void>((resolve) => session.once("remoteSettings", () => resolve()));
      assert.equal(session.remoteSettings.initialWindowSize, HTTP2_STREAM_WINDOW);
      // The connection window arrives as a WINDOW_UPDATE after the settings.
      for (let i = 0; i < 50 && session.state.remoteWindowSize !== HTTP2_CONNECTION_WINDOW; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.equal(session.state.remoteWindowSize, HTTP2_CONNECTION_WINDOW);
    } finally {
      session.close();
    }
  });

  test("the client opens its sessions with the same windows", async () => {
    const sessions: http2.ServerHttp2Session[] = [];
    const raw = http2.createServer();
    raw.on("session", (s) => sessions.push(s));
    raw.on("stream", (stream) => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "5", "grpc-message": "probe" }));
      stream.end();
    });
    await new Promise<void>((r) => raw.listen(0, "127.0.0.1", () => r()));
    try {
      const port = (raw.address() as AddressInfo).port;
      const client = createClient(LibraryService, createServiceTransport({ baseUrl: `http://127.0.0.1:${port}` }));
      await assert.rejects(client.echo({ text: "hi" }));
      const [s] = sessions;
      assert.ok(s);
      assert.equal(s.remoteSettings.initialWindowSize, HTTP2_STREAM_WINDOW);
      assert.equal(s.state.remoteWindowSize, HTTP2_CONNECTION_WINDOW);
    } finally {
      for (const s of sessions) s.destroy();
      await new Promise((r) => raw.close(r));
    }
  });
});
