// The bounds a server sets on its listeners (issue 15 item 4): the kernel's
// listen queue holds a burst of connections instead of dropping their SYNs,
// and an HTTP/2 connection may open at most MAX_CONCURRENT_STREAMS at once.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import { after, before, test } from "node:test";
import { testServer } from "../testing/fixture.ts";
import { LISTEN_BACKLOG, MAX_CONCURRENT_STREAMS } from "./listen-limits.ts";

const { server } = testServer();
let url: string;
let port: number;
before(async () => {
  ({ url, port } = await server.listen());
});
after(() => server.close());

test("the listener's backlog is LISTEN_BACKLOG (as far as net.core.somaxconn allows), not Node's 511", () => {
  const somaxconn = Number(readFileSync("/proc/sys/net/core/somaxconn", "utf8"));
  // For a listening socket, ss shows the backlog as Send-Q.
  const line = execFileSync("ss", ["-ltnH", `sport = :${port}`], { encoding: "utf8" }).trim();
  const backlog = Number(line.split(/\s+/)[2]);
  assert.equal(backlog, Math.min(LISTEN_BACKLOG, somaxconn), line);
  assert.ok(backlog > 511);
});

test("an HTTP/2 connection is told it may open at most MAX_CONCURRENT_STREAMS streams", async () => {
  const session = http2.connect(url);
  try {
    const settings = await new Promise<http2.Settings>((resolve, reject) => {
      session.once("remoteSettings", resolve);
      session.once("error", reject);
    });
    assert.equal(settings.maxConcurrentStreams, MAX_CONCURRENT_STREAMS);
  } finally {
    session.close();
  }
});
