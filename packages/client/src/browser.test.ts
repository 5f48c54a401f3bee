// The package is for browsers too: it must bundle for the browser platform
// with nothing of Node's (no node: built-ins, process, Buffer), so a web app's
// bundler takes it as it is.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { test } from "node:test";

// esbuild is tsx's own (the test runner's), not a dependency of this package; the little of its API used here.
type Build = (options: Record<string, unknown>) => Promise<{
  errors: unknown[];
  metafile: { inputs: Record<string, unknown> };
  outputFiles: Array<{ text: string }>;
}>;
const esbuild = createRequire(createRequire(import.meta.url).resolve("tsx"))("esbuild") as { build: Build };

test("bundles for the browser with no Node built-in or global", async () => {
  const entry = new URL("./index.ts", import.meta.url).pathname;
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "browser",
    format: "esm",
    target: "es2022",
    write: false,
    minify: true,
    logLevel: "silent",
    metafile: true,
  });
  assert.deepEqual(result.errors, []);
  const inputs = Object.keys(result.metafile.inputs);
  assert.ok(!inputs.some((f) => f.startsWith("node:")), inputs.join("\n"));
  const code = result.outputFiles[0]!.text;
  // The package's own files use no Node global (libraries may probe for one behind a typeof check).
  const own = inputs.filter((f) => f.startsWith("packages/client/"));
  assert.ok(own.length >= 8, own.join("\n"));
  for (const f of own) {
    const text = readFileSync(new URL(`../../../${f}`, import.meta.url), "utf8");
    assert.ok(!/\bprocess\.|\bBuffer\b|\brequire\(/.test(text), `${f} uses a Node global`);
  }
  const kib = Math.round(code.length / 1024);
  // The generated descriptors of the four services dominate; a regression to pulling in the server side would be far larger.
  assert.ok(kib < 400, `${kib} KiB`);
  console.log(`browser bundle: ${kib} KiB minified, ${inputs.length} modules`);
});
