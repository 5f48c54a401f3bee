import type { Field } from "./field.ts";

/**
 * The settings of a service as a Markdown table, one row per visible field in
 * declaration order: what `--settings` prints and what the README holds
 * between its settings markers.
 */
export function settingsTable(fields: Readonly<Record<string, Field<unknown>>>): string {
  const rows = Object.values(fields)
    .filter((f) => !f.hidden)
    .map((f) => `| ${f.names.map((n) => `\`${n}\``).join(", ")} | ${f.shown} | ${f.doc.replaceAll("|", "\\|")} |`);
  return ["| Variable | Default | |", "|---|---|---|", ...rows].join("\n");
}

/** The line before a README's generated settings table; `section` tells apart several in one README. */
export function settingsBegin(section?: string): string {
  return `<!-- settings${section ? ` ${section}` : ""}: generated from the declarations; \`--settings\` prints it -->`;
}
export const SETTINGS_END = "<!-- /settings -->";

/** The table between a README's settings markers, or undefined without them. */
export function readmeSettings(markdown: string, section?: string): string | undefined {
  const begin = settingsBegin(section);
  const start = markdown.indexOf(begin);
  const end = markdown.indexOf(SETTINGS_END, start);
  if (start < 0 || end < 0) return undefined;
  return markdown.slice(start + begin.length, end).trim();
}

/**
 * `--settings` on a service's command line: prints its settings table and
 * exits 0, before anything is read or started.
 */
export function listSettingsIfAsked(
  fields: Readonly<Record<string, Field<unknown>>>,
  argv: readonly string[] = process.argv.slice(2),
): void {
  if (!argv.includes("--settings")) return;
  process.stdout.write(`${settingsTable(fields)}\n`);
  process.exit(0);
}
