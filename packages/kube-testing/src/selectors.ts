// Label selectors as the API server parses them (apimachinery labels.Parse):
// equality (=, ==, !=), set-based (in, notin) and existence (key, !key),
// requirements joined by commas and all required to match.
import { statusErrors } from "./status.ts";

type Requirement =
  | { key: string; op: "=" | "!="; value: string }
  | { key: string; op: "in" | "notin"; values: string[] }
  | { key: string; op: "exists" | "!exists" };

export type LabelSelector = (labels: Record<string, string> | undefined) => boolean;

/** Splits on commas that are not inside parentheses. */
function splitTop(s: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of s) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(cur);
      cur = "";
    } else cur += ch;
  }
  parts.push(cur);
  return parts.map((p) => p.trim()).filter((p) => p !== "");
}

function parseRequirement(raw: string): Requirement {
  let m = /^!\s*([^\s=!(),]+)$/.exec(raw);
  if (m) return { key: m[1], op: "!exists" };
  m = /^([^\s=!(),]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(raw);
  if (m) {
    const values = m[3].split(",").map((v) => v.trim());
    return { key: m[1], op: m[2] as "in" | "notin", values };
  }
  m = /^([^\s=!(),]+)\s*(==|=|!=)\s*([^\s=!(),]*)$/.exec(raw);
  if (m) return { key: m[1], op: m[2] === "!=" ? "!=" : "=", value: m[3] };
  m = /^([^\s=!(),]+)$/.exec(raw);
  if (m) return { key: m[1], op: "exists" };
  throw statusErrors.badRequest(`unable to parse requirement: ${JSON.stringify(raw)}`);
}

/** A predicate for a label selector string (=, ==, !=, in, notin, exists, !key); malformed is 400 as the API server says. */
export function parseLabelSelector(selector: string | undefined | null): LabelSelector {
  if (!selector) return () => true;
  const reqs = splitTop(selector).map(parseRequirement);
  return (labels) => {
    const l = labels ?? {};
    return reqs.every((r) => {
      const has = Object.hasOwn(l, r.key);
      switch (r.op) {
        case "=":
          return has && l[r.key] === r.value;
        case "!=":
          return !has || l[r.key] !== r.value;
        case "in":
          return has && r.values.includes(l[r.key]);
        case "notin":
          return !has || !r.values.includes(l[r.key]);
        case "exists":
          return has;
        case "!exists":
          return !has;
        default:
          return false;
      }
    });
  };
}

/** Field selectors: only metadata.name and metadata.namespace (=, ==, !=), as supported for every resource. */
export function parseFieldSelector(
  selector: string | undefined | null,
): (obj: { metadata?: { name?: string; namespace?: string } }) => boolean {
  if (!selector) return () => true;
  const reqs = splitTop(selector).map((raw) => {
    const m = /^(metadata\.name|metadata\.namespace)\s*(==|=|!=)\s*(.*)$/.exec(raw);
    if (!m) throw statusErrors.badRequest(`field label not supported: ${raw.split(/[=!]/)[0]}`);
    return { field: m[1] === "metadata.name" ? "name" : "namespace", neg: m[2] === "!=", value: m[3] } as const;
  });
  return (obj) => reqs.every((r) => (obj.metadata?.[r.field] === r.value) !== r.neg);
}
