import { createRequire } from "node:module";
import { setFlagsFromString } from "node:v8";
import { PlatformError } from "@platform/errors";
import type { Ajv, ValidateFunction } from "ajv";
import type { RegExpEngine } from "ajv/dist/types/index.js";
import type { ClientTool } from "./model.ts";

// Client tools (issue 20 item 4): tools an agent declares with a JSON Schema
// and that its client runs. The schemas come from API callers, so they are
// bounded in size and compiled by Ajv (never hand-checked); runs validate
// the model's inputs with the same compiled schemas (tools/client-tools.ts).

/** The built-in tools' names (tools/toolbox.ts; a test keeps the two equal): no client tool may take one. */
export const BUILT_IN_TOOL_NAMES: readonly string[] = ["bash", "read_file", "write_file", "list_files"];

export const MAX_CLIENT_TOOLS = 32;
export const MAX_CLIENT_TOOL_DESCRIPTION = 4096;
export const MAX_CLIENT_TOOL_SCHEMA_BYTES = 32 * 1024;
/** Providers' tool-name rule (Anthropic's and OpenAI's); `__` is the MCP tools' `<server>__<tool>` separator. */
const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

// Patterns (`pattern`, `patternProperties`) come from API callers and run
// on model output in a process every tenant shares: a backtracking pattern
// such as ^(a+)+$ could hold the event loop for minutes. V8's linear-time
// engine (the `l` flag, behind this flag) runs them in time linear in the
// input; a pattern it cannot run (backreferences, lookaround, `u` mode
// classes) fails to compile, so its schema is refused when it is set.
setFlagsFromString("--enable-experimental-regexp-engine");
const linearRegExp: RegExpEngine = Object.assign((pattern: string) => new RegExp(pattern, "l"), {
  code: "linearRegExp",
});

/**
 * One Ajv for the process, made when the first client tool is checked: Ajv
 * and its compiled meta-schemas are several MiB that an agents process whose
 * agents declare no client tool never needs (required, not imported, as
 * every caller is synchronous; Ajv is CommonJS either way).
 * `addUsedSchema: false`: a schema's `$id` stays
 * its own (two agents may use the same id for different schemas); no
 * `loadSchema`: a remote `$ref` is a compile error, nothing is fetched.
 * `strict: false`: keywords Ajv does not know are annotations, as in the
 * specification, so schemas written for other validators still compile
 * (`format` too: no format is checked). `unicodeRegExp: false`: the linear
 * engine has no `u` mode. `allErrors: false`: validation stops at the first
 * error (the model gets that one).
 */
export function ajv(): Ajv {
  if (!instance) {
    const { Ajv } = createRequire(import.meta.url)("ajv") as typeof import("ajv");
    instance = new Ajv({
      strict: false,
      addUsedSchema: false,
      allErrors: false,
      unicodeRegExp: false,
      logger: false,
      code: { regExp: linearRegExp },
    });
  }
  return instance;
}
let instance: Ajv | undefined;

/** Compiled validators by schema text; bounded (Ajv keeps each compiled schema until removed). */
const compiled = new Map<string, ValidateFunction>();
const COMPILED_MAX = 256;

/** The compiled validator of a schema (compiled once per distinct schema, up to the cache's bound). */
export function validatorOf(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  const hit = compiled.get(key);
  if (hit) {
    // Most recently used last: the oldest is evicted first.
    compiled.delete(key);
    compiled.set(key, hit);
    return hit;
  }
  const fn = ajv().compile(schema);
  compiled.set(key, fn);
  if (compiled.size > COMPILED_MAX) {
    const [oldKey, old] = compiled.entries().next().value as [string, ValidateFunction];
    compiled.delete(oldKey);
    ajv().removeSchema(old.schema as Record<string, unknown>);
  }
  return fn;
}

/** A client tool as a create or update gives it (the schema as JSON text). */
export type ClientToolInput = { name: string; description: string; inputSchema: string };

/** One entry: name, description and schema checked; INVALID_ARGUMENT names the tool. */
function parseTool(input: ClientToolInput, at: string): ClientTool {
  const label = `clientTools[${at}]`;
  if (!NAME.test(input.name))
    throw PlatformError.invalidArgument(
      `${label}: a client tool's name is 1 to 64 characters of a-z A-Z 0-9 _ - ("${input.name.slice(0, 70)}")`,
    );
  const named = `${label} ("${input.name}")`;
  if (input.name.includes("__"))
    throw PlatformError.invalidArgument(`${named}: "__" is reserved for MCP tools' <server>__<tool> names`);
  if (BUILT_IN_TOOL_NAMES.includes(input.name))
    throw PlatformError.invalidArgument(`${named}: "${input.name}" is a built-in tool's name`);
  if (input.description.length > MAX_CLIENT_TOOL_DESCRIPTION)
    throw PlatformError.invalidArgument(
      `${named}: the description is longer than ${MAX_CLIENT_TOOL_DESCRIPTION} characters`,
    );
  if (Buffer.byteLength(input.inputSchema) > MAX_CLIENT_TOOL_SCHEMA_BYTES)
    throw PlatformError.invalidArgument(`${named}: inputSchema is larger than ${MAX_CLIENT_TOOL_SCHEMA_BYTES} bytes`);
  let schema: unknown;
  try {
    schema = JSON.parse(input.inputSchema);
  } catch {
    throw PlatformError.invalidArgument(`${named}: inputSchema is not JSON`);
  }
  if (typeof schema !== "object" || schema === null || Array.isArray(schema))
    throw PlatformError.invalidArgument(`${named}: inputSchema must be a JSON Schema object`);
  const object = schema as Record<string, unknown>;
  // Providers take only object inputs (Anthropic's input_schema, OpenAI's function parameters).
  if (object.type !== "object")
    throw PlatformError.invalidArgument(`${named}: inputSchema must describe an object ("type": "object")`);
  try {
    validatorOf(object);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw PlatformError.invalidArgument(`${named}: inputSchema is not a valid JSON Schema: ${reason.slice(0, 300)}`);
  }
  return { name: input.name, description: input.description, inputSchema: object };
}

/** The client tools of a create: at most 32, names unique, each checked. */
export function validateClientTools(input: readonly ClientToolInput[]): ClientTool[] {
  if (input.length > MAX_CLIENT_TOOLS)
    throw PlatformError.invalidArgument(`clientTools has more than ${MAX_CLIENT_TOOLS} tools`);
  const seen = new Set<string>();
  return input.map((t, i) => {
    const tool = parseTool(t, String(i));
    if (seen.has(tool.name))
      throw PlatformError.invalidArgument(`clientTools[${i}] ("${tool.name}"): the name is given twice`);
    seen.add(tool.name);
    return tool;
  });
}

/**
 * An update's client tools merged into `current` by name: an entry
 * replaces the tool of its name or adds it; one with an empty
 * `inputSchema` removes it. The result is bounded as on create.
 */
export function mergeClientTools(current: readonly ClientTool[], input: readonly ClientToolInput[]): ClientTool[] {
  const names = new Set<string>();
  const merged = new Map(current.map((t) => [t.name, t]));
  input.forEach((t, i) => {
    if (names.has(t.name))
      throw PlatformError.invalidArgument(`clientTools[${i}] ("${t.name}"): the name is given twice`);
    names.add(t.name);
    if (t.inputSchema === "") merged.delete(t.name);
    else merged.set(t.name, parseTool(t, String(i)));
  });
  if (merged.size > MAX_CLIENT_TOOLS)
    throw PlatformError.invalidArgument(`clientTools would have more than ${MAX_CLIENT_TOOLS} tools`);
  return [...merged.values()];
}
