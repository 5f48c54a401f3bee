import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import Ajv2020Module from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import type { Schema } from "./json-schema.ts";

/** What the walk uses of Ajv (typed narrowly: Ajv's own types pull in its whole schema model). */
interface AjvLike {
  addSchema(schema: object, key?: string): unknown;
  addFormat(name: string, format: boolean | RegExp): unknown;
  compile(schema: object): ((data: unknown) => boolean) & { errors?: unknown[] | null };
}
// JSON Schema 2020-12, the dialect of OpenAPI 3.1 (the same Ajv and formats versions the validator uses).
const Ajv2020 = Ajv2020Module as unknown as new (opts: object) => AjvLike;
const addFormats = addFormatsModule as unknown as (ajv: AjvLike) => void;

const pointer = (parts: string[]) => parts.map((p) => p.replaceAll("~", "~0").replaceAll("/", "~1")).join("/");

/** One answer, checked against the document. */
export interface Answer {
  status: number;
  json?: unknown;
  events?: Array<{ event: string; id?: string; data: unknown }>;
  headers: Headers;
}

export interface Call {
  path?: Record<string, string>;
  query?: Record<string, string>;
  body?: unknown;
  /** A raw body (sent as is with its own content type). */
  raw?: { contentType: string; text: string };
  headers?: Record<string, string>;
  token?: string;
  /** The status the call must answer (one of them). */
  expect: number | number[];
  /** An SSE stream still open after this long is read no further (a rejoin that waits for live events). */
  streamMs?: number;
}

/**
 * Sends requests to a running service and checks every answer against the
 * service's OpenAPI document: the status is one the operation lists, the
 * content type the one it names, the JSON body (or each SSE event's data)
 * valid by the schema it gives. Remembers which operations were walked.
 */
export class DocumentWalker {
  readonly doc: Schema;
  readonly walked = new Set<string>();
  readonly #ajv: AjvLike;
  readonly #base: string;
  readonly #compiled = new Map<string, ReturnType<AjvLike["compile"]>>();

  constructor(
    readonly name: string,
    file: URL,
    readonly baseUrl: string,
  ) {
    this.doc = JSON.parse(readFileSync(file, "utf8"));
    this.#ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(this.#ajv);
    for (const f of ["uint32", "uint64"]) this.#ajv.addFormat(f, true);
    this.#base = `https://openapi.test/${name}.json`;
    this.#ajv.addSchema({ ...this.doc, $id: this.#base });
  }

  /** Every operation of the document, as `VERB path`. */
  operations(): string[] {
    const out: string[] = [];
    for (const [path, item] of Object.entries(this.doc.paths as Record<string, Schema>))
      for (const verb of Object.keys(item)) out.push(`${verb.toUpperCase()} ${path}`);
    return out;
  }

  operation(verb: string, path: string): Schema {
    const op = (this.doc.paths as Record<string, Record<string, Schema>>)[path]?.[verb.toLowerCase()];
    assert.ok(op, `${this.name}: ${verb} ${path} is not in the document`);
    return op;
  }

  #validate(where: string[], value: unknown, what: string): void {
    const key = pointer(where);
    let validate = this.#compiled.get(key);
    if (!validate) {
      validate = this.#ajv.compile({ $ref: `${this.#base}#/${key}` });
      this.#compiled.set(key, validate);
    }
    assert.ok(
      validate(value),
      `${what}: answer not valid by #/${key}\n${JSON.stringify(validate.errors, null, 2)}\n${JSON.stringify(value).slice(0, 2000)}`,
    );
  }

  /** Sends one request of the operation `verb path` and checks the answer. */
  async call(verb: string, path: string, c: Call): Promise<Answer> {
    const op = this.operation(verb, path);
    const what = `${this.name}: ${verb} ${path} (expected ${c.expect})`;
    let url = path.replace(/\{([^}]+)\}/g, (_, v: string) => {
      const value = c.path?.[v];
      assert.ok(value !== undefined, `${what}: path parameter ${v}`);
      return encodeURIComponent(value);
    });
    if (c.query) url += `?${new URLSearchParams(c.query)}`;
    const headers: Record<string, string> = { ...c.headers };
    if (c.token) headers.authorization = `Bearer ${c.token}`;
    let body: string | undefined;
    if (c.raw) {
      body = c.raw.text;
      headers["content-type"] = c.raw.contentType;
    } else if (c.body !== undefined) {
      body = JSON.stringify(c.body);
      headers["content-type"] = "application/json";
    }
    // A request the service takes must be one the document allows.
    const expected = Array.isArray(c.expect) ? c.expect : [c.expect];
    if (expected.every((s) => s < 300) && c.body !== undefined) {
      assert.ok(op.requestBody, `${what}: a body, but the document takes none`);
      const where = ["paths", path, verb.toLowerCase(), "requestBody", "content", "application/json", "schema"];
      this.#validate(where, c.body, `${what} request body`);
    }
    const res = await fetch(this.baseUrl + url, { method: verb, headers, body, signal: AbortSignal.timeout(300_000) });
    const text = await readBody(res, c.streamMs);
    assert.ok(expected.includes(res.status), `${what}: status ${res.status}: ${text.slice(0, 500)}`);
    this.walked.add(`${verb} ${path}`);

    const responses = op.responses as Record<string, Schema>;
    assert.ok(responses[String(res.status)], `${what}: status ${res.status} is not documented`);
    // A shared response ($ref to components.responses) is checked where it is.
    let where = ["paths", path, verb.toLowerCase(), "responses", String(res.status)];
    let response = responses[String(res.status)]!;
    if (typeof response.$ref === "string") {
      where = (response.$ref as string).slice(2).split("/");
      response = (this.doc.components as Record<string, Record<string, Schema>>).responses![where[2]!]!;
    }
    const content = response.content as Record<string, Schema> | undefined;
    const type = (res.headers.get("content-type") ?? "").split(";")[0]!.trim();
    if (!content) {
      assert.equal(text, "", `${what}: no body documented`);
      return { status: res.status, headers: res.headers };
    }
    assert.ok(content[type], `${what}: content type ${type} is not documented (${Object.keys(content)})`);
    if (type === "text/event-stream") {
      const events = parseSse(text);
      const documented = response["x-sse-events"] as Array<{ event: string; data: Schema }>;
      for (const e of events) {
        const i = documented.findIndex((d) => d.event === e.event);
        assert.ok(i >= 0, `${what}: SSE event ${e.event} is not documented`);
        const data = documented[i]!.data;
        const value = data.contentMediaType === "text/plain" ? e.data : JSON.parse(e.data);
        this.#validate([...where, "x-sse-events", String(i), "data"], value, `${what} event ${e.event}`);
      }
      return {
        status: res.status,
        headers: res.headers,
        events: events.map((e) => ({ ...e, data: tryJson(e.data) })),
      };
    }
    const json = JSON.parse(text);
    this.#validate([...where, "content", type, "schema"], json, what);
    return { status: res.status, json, headers: res.headers };
  }
}

/** The whole body, or what came of it in `ms` (then the stream is cancelled). */
async function readBody(res: Response, ms: number | undefined): Promise<string> {
  if (ms === undefined || !res.body) return res.text();
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const timer = setTimeout(() => reader.cancel().catch(() => {}), ms);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    clearTimeout(timer);
  }
  // A cut stream may end inside an event: only whole events count.
  const end = text.lastIndexOf("\n\n");
  return end < 0 ? "" : text.slice(0, end + 2);
}

function tryJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
}

/** The events of a whole SSE body (comments dropped). */
export function parseSse(text: string): Array<{ event: string; id?: string; data: string }> {
  const out: Array<{ event: string; id?: string; data: string }> = [];
  for (const block of text.split(/\n\n/)) {
    let event = "message";
    let id: string | undefined;
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const at = line.indexOf(":");
      const field = at < 0 ? line : line.slice(0, at);
      const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "id") id = value;
      else if (field === "data") data.push(value);
    }
    if (data.length > 0) out.push({ event, id, data: data.join("\n") });
  }
  return out;
}
