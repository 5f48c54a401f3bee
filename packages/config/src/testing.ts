import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import type { Field } from "./field.ts";
import { readmeSettings, SETTINGS_END, settingsBegin, settingsTable } from "./listing.ts";

/**
 * Fails when a README's settings table differs from the one generated from
 * the declarations, or when `<main> --settings` prints anything else: the
 * README, the listing and the reader cannot drift apart.
 */
export function assertSettingsListed(o: {
  readme: URL;
  fields: Readonly<Record<string, Field<unknown>>>;
  /** The entry point that answers `--settings`, run with node --import tsx; omitted: not checked. */
  main?: URL;
  /** Which of several tables in the README (`<!-- settings router: … -->`). */
  section?: string;
  /** Arguments after `--settings` (a service with several processes). */
  args?: string[];
}): void {
  const want = settingsTable(o.fields);
  const readme = readmeSettings(readFileSync(o.readme, "utf8"), o.section);
  assert.ok(readme !== undefined, `${o.readme.pathname} has no ${settingsBegin(o.section)} … ${SETTINGS_END} section`);
  assert.equal(readme, want, `${o.readme.pathname}: the settings table is not the generated one; paste --settings`);
  if (!o.main) return;
  const r = spawnSync(process.execPath, ["--import", "tsx", o.main.pathname, "--settings", ...(o.args ?? [])], {
    env: { PATH: process.env.PATH ?? "" },
    encoding: "utf8",
    timeout: 120_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), want);
}
