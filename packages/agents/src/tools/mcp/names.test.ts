import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { modelToolName, serverOf } from "./names.ts";
import { headersAad } from "../../domain/mcp-servers.ts";
import { HeaderSecrets } from "./secrets.ts";

const PROVIDER_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

test("model tool names: <server>__<tool>, fitted to the providers' rule, distinct when cut", () => {
  assert.equal(modelToolName("github", "create_issue"), "github__create_issue");
  assert.equal(modelToolName("fs", "read.file/v2"), "fs__read_file_v2");
  const a = modelToolName("s".repeat(32), `${"t".repeat(60)}_a`);
  const b = modelToolName("s".repeat(32), `${"t".repeat(60)}_b`);
  for (const name of [a, b]) assert.match(name, PROVIDER_NAME);
  assert.notEqual(a, b);
  assert.equal(serverOf(a), "s".repeat(32));
  assert.equal(serverOf("github__create__issue"), "github");
  assert.equal(serverOf("read_file"), undefined);
  assert.equal(serverOf("__x"), undefined);
});

test("sealed headers open only with the same key, org and server", () => {
  const key = randomBytes(32);
  const secrets = new HeaderSecrets(key);
  const sealed = secrets.seal({ Authorization: "Bearer s3cret" }, headersAad("org-1", "github"));
  assert.ok(!Buffer.from(sealed, "base64").toString("latin1").includes("s3cret"));
  assert.deepEqual(secrets.open(sealed, headersAad("org-1", "github")), { Authorization: "Bearer s3cret" });
  assert.throws(() => secrets.open(sealed, headersAad("org-2", "github")), /do not open/);
  assert.throws(() => secrets.open(sealed, headersAad("org-1", "other")), /do not open/);
  assert.throws(() => new HeaderSecrets(randomBytes(32)).open(sealed, headersAad("org-1", "github")), /do not open/);
  assert.throws(() => new HeaderSecrets(undefined).seal({ A: "b" }, "x"), /AGENTS_SECRETS_KEY/);
});
