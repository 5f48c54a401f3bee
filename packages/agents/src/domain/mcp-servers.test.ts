import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import { type HeaderSealer, mergeMcpServers, validateMcpServers } from "./mcp-servers.ts";

const sealer: HeaderSealer = { seal: (headers, aad) => `sealed(${aad}):${Object.keys(headers).join(",")}` };

test("without a sealer (no AGENTS_SECRETS_KEY) a server with headers is failed_precondition; one without headers is kept", () => {
  assert.throws(
    () =>
      validateMcpServers(
        [{ name: "gh", url: "https://mcp.example.com", headers: { Authorization: "x" } }],
        "o",
        undefined,
      ),
    (err: unknown) =>
      err instanceof PlatformError && err.code === Code.FailedPrecondition && /AGENTS_SECRETS_KEY/.test(err.message),
  );
  assert.deepEqual(validateMcpServers([{ name: "gh", url: "https://mcp.example.com" }], "o", undefined), [
    { name: "gh", url: "https://mcp.example.com", headerNames: [] },
  ]);
});

test("headers are sealed bound to the org and server; merge replaces, adds and removes by name", () => {
  const [gh] = validateMcpServers(
    [{ name: "gh", url: "https://mcp.example.com", headers: { Authorization: "Bearer t" } }],
    "org-1",
    sealer,
  );
  assert.deepEqual(gh, {
    name: "gh",
    url: "https://mcp.example.com",
    headerNames: ["Authorization"],
    sealedHeaders: "sealed(agents.mcp_headers:org-1:gh):Authorization",
  });
  const current = [gh!, { name: "fs", url: "http://127.0.0.1:9000/mcp", headerNames: [] }];
  const merged = mergeMcpServers(
    current,
    [
      { name: "gh", url: "https://mcp.example.com/v2" },
      { name: "fs", url: "" },
      { name: "new", url: "https://new.example.com" },
    ],
    "org-1",
    sealer,
  );
  assert.deepEqual(
    merged.map((s) => [s.name, s.url, s.headerNames, s.sealedHeaders]),
    [
      ["gh", "https://mcp.example.com/v2", [], undefined],
      ["new", "https://new.example.com", [], undefined],
    ],
  );
  assert.throws(() => mergeMcpServers(current, [{ name: "nope", url: "" }], "org-1", sealer), /no MCP server "nope"/);
  const eight = Array.from({ length: 7 }, (_, i) => ({ name: `s${i}`, url: "https://x.example.com" }));
  assert.throws(() => mergeMcpServers(current, eight, "org-1", sealer), /more than 8/);
});
