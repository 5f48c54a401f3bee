// test-timeout: 180000
// The README's "Using the E2B SDK" example, run as written (a separate node
// process importing the real `e2b` package) with the three settings the
// README names, against compute, identity's double and the e2b service.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import * as fs from "node:fs";
import { after, before, test } from "node:test";
import { KyselySandboxStore } from "@platform/compute";
import { type E2bStack, startE2bStack } from "./testing/e2b-stack.ts";

let stack: E2bStack;

before(async () => {
  stack = await startE2bStack("readme");
});

after(async () => {
  await stack?.close();
});

function example(): string {
  const readme = fs.readFileSync(new URL("../README.md", import.meta.url), "utf8");
  const section = readme.slice(readme.indexOf("## Using the E2B SDK"));
  const m = section.match(/```js\n([\s\S]*?)```/);
  assert.ok(m, "the section has a js block");
  return m[1]!;
}

test("the README example runs as written and leaves no sandbox behind", async () => {
  const code = example();
  assert.ok(code.split("\n").filter(Boolean).length <= 10, "about ten lines");
  // In the package directory, so `import "e2b"` resolves to its pinned devDependency.
  const file = new URL(`../.readme-example-${process.pid}.mjs`, import.meta.url);
  fs.writeFileSync(file, code);
  const key = stack.identity.apiKey(["sessions:run"]);
  try {
    // Asynchronously: compute and the e2b service answer from this process.
    const r = await promisify(execFile)(process.execPath, [file.pathname], {
      env: {
        PATH: process.env.PATH,
        E2B_API_URL: stack.compat.url,
        E2B_SANDBOX_URL: stack.compat.url,
        E2B_API_KEY: key.token,
      },
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(r.stdout, "hello from Linux\nexit code 0\n42\n", r.stderr);
  } finally {
    fs.rmSync(file, { force: true });
  }
  const live = await new KyselySandboxStore(stack.compute.database).listLive();
  assert.deepEqual(
    live.filter((s) => s.tenantId === key.orgId).map((s) => s.status),
    [],
    "the example's sandbox was killed",
  );
});
