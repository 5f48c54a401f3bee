import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { test } from "node:test";
import { AgentsCode, AuthReason, ErrorAction, IdentityRestCode } from "@platform/errors";

// Every reason string the specification names, as it spells them.
const specified = [
  "invalid_request",
  "unauthenticated",
  "insufficient_role",
  "resource_not_found",
  "internal",
  "refresh_token_required",
  "refresh_token_reused",
  "refresh_token_invalid",
  "user_id_required",
  "user_id_invalid",
  "invalid_credentials",
  "wrong_environment",
  "no_membership",
  "expired",
  "key_retired",
  "not_a_member",
  "kid_unknown",
  "re_authenticate",
  "not_found",
];

test("every reason of the specification is defined in @platform/errors", () => {
  const defined = new Set<string>([
    ...Object.values(IdentityRestCode),
    ...Object.values(AuthReason),
    ...Object.values(ErrorAction),
    ...Object.values(AgentsCode),
  ]);
  for (const reason of specified) assert.ok(defined.has(reason), reason);
});

// Distinctive reasons must not be re-typed as literals elsewhere: services
// import them, so a rename happens in one place.
const distinctive = specified.filter((r) => r.includes("_") && !["not_found", "invalid_request"].includes(r));

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sources(p, out);
    else if (name.endsWith(".ts") && !name.endsWith(".test.ts") && !p.includes("/testing/")) out.push(p);
  }
  return out;
}

test("distinctive reason strings are written once, in packages/errors", () => {
  const root = new URL("../../..", import.meta.url).pathname;
  const offenders: string[] = [];
  for (const file of sources(join(root, "packages"))) {
    if (file.includes("/packages/errors/")) continue;
    const text = readFileSync(file, "utf8");
    for (const reason of distinctive) {
      if (text.includes(`"${reason}"`) || text.includes(`'${reason}'`))
        offenders.push(`${relative(root, file)}: ${reason}`);
    }
  }
  assert.deepEqual(offenders, []);
});
