// `pnpm gen` (after buf): writes gen/openapi/<service>.json, one OpenAPI 3.1
// document per REST port, from the generated descriptors, their
// google.api.http rules, the services' own access tables and proto/'s comments.
//   node --import tsx scripts/openapi.ts [--out <dir>]   (gen-check writes to a temporary directory)
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ruleOf } from "../packages/identity/src/server/policies.ts";
import { scopeOf } from "../packages/agents/src/server/scopes.ts";
import {
  agentsSurface,
  identitySurface,
  loadProtoComments,
  openApiDocument,
  routerSurface,
} from "../packages/contract/src/openapi/index.ts";

const root = new URL("..", import.meta.url).pathname;
const at = process.argv.indexOf("--out");
const out = at >= 0 ? process.argv[at + 1]! : join(root, "gen/openapi");
mkdirSync(out, { recursive: true });
// Descriptions: the comments of proto/ (gen/'s descriptors carry none).
const comments = loadProtoComments(root);
for (const surface of [identitySurface(ruleOf), agentsSurface(scopeOf), routerSurface()]) {
  const file = join(out, `${surface.name}.json`);
  writeFileSync(file, `${JSON.stringify(openApiDocument(surface, comments), null, 2)}\n`);
  if (at < 0) console.log(`wrote ${file.slice(root.length)}`);
}
