// The path template grammar of google/api/http.proto:
//
//   Template = "/" Segments [ Verb ] ;
//   Segments = Segment { "/" Segment } ;
//   Segment  = "*" | "**" | LITERAL | Variable ;
//   Variable = "{" FieldPath [ "=" Segments ] "}" ;
//   FieldPath = IDENT { "." IDENT } ;
//   Verb     = ":" LITERAL ;
//
// Matching works on the raw (still percent-encoded) path split at "/", so an
// encoded slash never splits a segment. Variable values are then decoded by
// the rules of http.proto: a single-segment variable decodes everything
// (%2F becomes "/"); a multi-segment variable decodes everything except
// %2F / %2f, which stay as they are.

export type Segment = { kind: "literal"; value: string } | { kind: "*" } | { kind: "**" };

export interface Variable {
  /** Field path, e.g. ["book", "name"]. */
  fieldPath: string[];
  /** Index of the first segment the variable covers. */
  start: number;
  /** Index after the last segment it covers. */
  end: number;
  /** More than one segment or `**`: %2F stays encoded in the value. */
  multi: boolean;
}

export interface PathTemplate {
  source: string;
  segments: Segment[];
  variables: Variable[];
  verb?: string;
}

/** A google.api.http path template that does not parse. */
export class TemplateSyntaxError extends Error {
  override name = "TemplateSyntaxError";
}

const identRe = /^[A-Za-z_][A-Za-z0-9_]*$/;
// Characters that end a literal. ":" starts the verb, so a literal cannot
// hold one (grpc-gateway's rule as well).
const literalStop = new Set(["/", "{", "}", ":", "*", "=", "?", "#"]);

/** Parses a google.api.http path template (`/v1/{name=orgs/*}/keys:verb`) into segments and variables. */
export function parseTemplate(source: string): PathTemplate {
  let i = 0;
  const segments: Segment[] = [];
  const variables: Variable[] = [];
  const fail = (msg: string): never => {
    throw new TemplateSyntaxError(`${msg} at ${i} in path template "${source}"`);
  };

  const parseSegments = (inVariable: boolean): void => {
    for (;;) {
      parseSegment(inVariable);
      if (source[i] !== "/") return;
      i++;
    }
  };
  const parseSegment = (inVariable: boolean): void => {
    if (source.startsWith("**", i)) {
      segments.push({ kind: "**" });
      i += 2;
    } else if (source[i] === "*") {
      segments.push({ kind: "*" });
      i += 1;
    } else if (source[i] === "{") {
      if (inVariable) fail("nested variable");
      parseVariable();
    } else {
      const startAt = i;
      while (i < source.length && !literalStop.has(source[i]!)) i++;
      if (i === startAt) fail("empty segment");
      const raw = source.slice(startAt, i);
      const value = decodeAll(raw);
      if (value === undefined) fail("bad percent-encoding in literal");
      segments.push({ kind: "literal", value: value! });
    }
  };
  const parseVariable = (): void => {
    i++; // {
    const startAt = i;
    while (i < source.length && source[i] !== "=" && source[i] !== "}") i++;
    const fieldPath = source.slice(startAt, i).split(".");
    if (!fieldPath.every((p) => identRe.test(p))) fail("bad field path");
    const first = segments.length;
    if (source[i] === "=") {
      i++;
      parseSegments(true);
    } else {
      segments.push({ kind: "*" });
    }
    if (source[i] !== "}") fail("expected }");
    i++;
    const covered = segments.slice(first);
    const multi = covered.length > 1 || covered.some((s) => s.kind === "**");
    variables.push({ fieldPath, start: first, end: segments.length, multi });
  };

  if (source[0] !== "/") fail("template must start with /");
  i = 1;
  parseSegments(false);
  let verb: string | undefined;
  if (source[i] === ":") {
    i++;
    const startAt = i;
    while (i < source.length && !literalStop.has(source[i]!)) i++;
    if (i === startAt) fail("empty verb");
    verb = source.slice(startAt, i);
  }
  if (i !== source.length) fail(`unexpected "${source[i]}"`);
  const deep = segments.findIndex((s) => s.kind === "**");
  if (deep !== -1 && deep !== segments.length - 1) fail("** must be the last segment");
  const seen = new Set<string>();
  for (const v of variables) {
    const key = v.fieldPath.join(".");
    if (seen.has(key)) fail(`variable ${key} bound twice`);
    seen.add(key);
  }
  return { source, segments, variables, verb };
}

export interface TemplateMatch {
  /** Field path (dotted) → decoded value. */
  values: Map<string, string>;
  /** Higher is more specific: literals beat `*`, which beats `**`. */
  score: number[];
}

/**
 * Matches a raw request path (no query string) against a template. Returns
 * undefined when it does not match, including when a variable value has an
 * invalid percent-encoding.
 */
export function matchTemplate(
  t: PathTemplate,
  rawPath: string,
  split: readonly string[] = pathParts(rawPath),
): TemplateMatch | undefined {
  if (!rawPath.startsWith("/")) return undefined;
  let parts: readonly string[];
  if (t.verb !== undefined) {
    const suffix = `:${t.verb}`;
    if (!rawPath.endsWith(suffix)) return undefined;
    parts = partsOf(rawPath.slice(1, -suffix.length));
  } else parts = split;
  // Start index in `parts` of every template segment (for variable values).
  const starts: number[] = [];
  let j = 0;
  for (let k = 0; k < t.segments.length; k++) {
    const seg = t.segments[k]!;
    starts[k] = j;
    if (seg.kind === "**") {
      j = parts.length;
      continue;
    }
    const part = parts[j];
    if (part === undefined || part === "") return undefined;
    if (seg.kind === "literal" && (part.includes("%") ? decodeAll(part) : part) !== seg.value) return undefined;
    j++;
  }
  starts[t.segments.length] = j;
  if (j !== parts.length) return undefined;
  const values = new Map<string, string>();
  for (const v of t.variables) {
    const raw = parts.slice(starts[v.start], starts[v.end]).join("/");
    const value = v.multi ? decodeKeepSlash(raw) : decodeAll(raw);
    if (value === undefined) return undefined;
    values.set(v.fieldPath.join("."), value);
  }
  const score: number[] = t.segments.map((s) => (s.kind === "literal" ? 3 : s.kind === "*" ? 2 : 1));
  score.push(t.verb !== undefined ? 1 : 0);
  return { values, score };
}

const partsOf = (path: string): string[] => (path === "" ? [] : path.split("/"));

/**
 * A raw path (leading "/" and all) split at "/", once for matching it
 * against every template of a table (lookupRoute) instead of again for each.
 */
export function pathParts(rawPath: string): readonly string[] {
  return partsOf(rawPath.startsWith("/") ? rawPath.slice(1) : rawPath);
}

function decodeAll(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

function decodeKeepSlash(raw: string): string | undefined {
  const pieces = raw.split(/%2F/i);
  const slashes = raw.match(/%2F/gi) ?? [];
  let out = "";
  for (let k = 0; k < pieces.length; k++) {
    const d = decodeAll(pieces[k]!);
    if (d === undefined) return undefined;
    out += d + (slashes[k] ?? "");
  }
  return out;
}

/** Compares two match scores; positive when `a` is more specific. */
export function compareScores(a: number[], b: number[]): number {
  for (let k = 0; k < Math.max(a.length, b.length); k++) {
    const d = (a[k] ?? 0) - (b[k] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
