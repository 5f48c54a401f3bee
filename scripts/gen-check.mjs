#!/usr/bin/env node
// Fails when gen/ is stale: regenerates into a temporary directory (buf's
// descriptors, then the OpenAPI documents) and compares it with the committed
// gen/ file by file.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const out = mkdtempSync(join(tmpdir(), "gen-check-"));
const template = readFileSync(join(root, "buf.gen.yaml"), "utf8").replace(/out: gen\b/, `out: ${out}`);
const config = join(out, "buf.gen.yaml");
writeFileSync(config, template);
execFileSync(join(root, "node_modules/.bin/buf"), ["generate", "--template", config], {
  cwd: root,
  stdio: "inherit",
  env: { ...process.env, PATH: `${join(root, "node_modules/.bin")}:${process.env.PATH}` },
});
rmSync(config);

function list(dir, base = dir, acc = new Map()) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (name === "node_modules") continue;
    if (statSync(p).isDirectory()) list(p, base, acc);
    else if (name.endsWith("_pb.ts") || relative(base, p).startsWith("openapi/"))
      acc.set(relative(base, p), readFileSync(p, "utf8"));
  }
  return acc;
}
// The OpenAPI documents (scripts/openapi.ts), from the committed descriptors:
// a stale descriptor is reported above, a stale document here.
execFileSync(process.execPath, ["--import", "tsx", join(root, "scripts/openapi.ts"), "--out", join(out, "openapi")], {
  cwd: root,
  stdio: "inherit",
});

const fresh = list(out);
const committed = list(join(root, "gen"));
rmSync(out, { recursive: true, force: true });
const problems = [];
for (const [f, text] of fresh) if (committed.get(f) !== text) problems.push(`stale or missing: gen/${f}`);
for (const f of committed.keys()) if (!fresh.has(f)) problems.push(`not generated from proto/: gen/${f}`);
if (problems.length) {
  console.error(`gen/ does not match proto/ (run pnpm gen):\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`gen/ is fresh (${fresh.size} files)`);
