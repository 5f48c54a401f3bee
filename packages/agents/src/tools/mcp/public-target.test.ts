// MCP server URLs come from any caller with agents:write: unless
// AGENTS_MCP_ALLOW_PRIVATE_TARGETS is on, the agents service must not call
// loopback, private or link-local addresses for them (SSRF).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { pino } from "pino";
import { McpTools } from "./mcp-tools.ts";
import { assertPublicTarget, isPublicAddress } from "@platform/rpc";
import { HeaderSecrets } from "./secrets.ts";

test("non-public addresses, written as IPv4, IPv6 or IPv4-mapped IPv6, are refused; public ones pass", async () => {
  for (const a of [
    "127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "::1",
    "::",
    "fd00::1",
    "fe80::1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
  ])
    assert.equal(isPublicAddress(a), false, a);
  for (const a of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
    assert.equal(isPublicAddress(a), true, a);
  await assert.rejects(assertPublicTarget(new URL("http://localhost:9/mcp")), /not a public address/);
  await assert.rejects(assertPublicTarget(new URL("http://[::1]:9/mcp")), /not a public address/);
  await assertPublicTarget(new URL("http://8.8.8.8/mcp")); // a literal address: no lookup, no connection
});

test("with private targets off, a server on 127.0.0.1 is never contacted and the run's model is told why", async () => {
  let contacted = 0;
  const server = createServer((_req, res) => {
    contacted++;
    res.statusCode = 500;
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  const tools = (allowPrivateTargets: boolean) =>
    new McpTools(
      "org",
      [{ name: "local", url, headerNames: [] }],
      {
        secrets: new HeaderSecrets(undefined),
        callTimeoutMs: 2000,
        connectTimeoutMs: 2000,
        outputLimitBytes: 1024,
        allowPrivateTargets,
      },
      pino({ level: "silent" }),
    );
  try {
    const off = tools(false);
    const signal = new AbortController().signal;
    assert.deepEqual(await off.specs(signal), []);
    const result = await off.run({ id: "t1", name: "local__anything", input: {} }, signal);
    assert.equal(result.isError, true);
    assert.match(result.content, /not a public address/);
    await off.close();
    assert.equal(contacted, 0, "the private server was contacted");

    // The control: allowed, the same server is reached (and fails, being no MCP server).
    const on = tools(true);
    assert.deepEqual(await on.specs(signal), []);
    await on.close();
    assert.ok(contacted > 0, "allowed, the server is reached");
  } finally {
    server.close();
  }
});
