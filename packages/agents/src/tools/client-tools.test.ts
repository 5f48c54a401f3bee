import assert from "node:assert/strict";
import { test } from "node:test";
import {
  BUILT_IN_TOOL_NAMES,
  MAX_CLIENT_TOOLS,
  mergeClientTools,
  validateClientTools,
} from "../domain/client-tools.ts";
import { ClientToolset, clientResult } from "./client-tools.ts";
import { TOOL_SPECS } from "./toolbox.ts";

const schema = (extra: Record<string, unknown> = {}) => JSON.stringify({ type: "object", ...extra });
const tool = (name: string, inputSchema = schema()) => ({ name, description: `${name} tool`, inputSchema });

test("client tools: the domain's list of built-in names is the toolbox's", () => {
  assert.deepEqual(
    BUILT_IN_TOOL_NAMES,
    TOOL_SPECS.map((t) => t.name),
  );
});

test("client tools: names, built-ins, duplicates, sizes and the count are checked, naming the tool", () => {
  const refused = (input: Parameters<typeof validateClientTools>[0], message: RegExp) =>
    assert.throws(() => validateClientTools(input), message);
  refused([tool("")], /clientTools\[0\]: a client tool's name is 1 to 64 characters/);
  refused([tool("x".repeat(65))], /1 to 64 characters/);
  refused([tool("dotted.name")], /1 to 64 characters/);
  refused([tool("read_file")], /"read_file" is a built-in tool's name/);
  refused([tool("srv__tool")], /reserved for MCP/);
  refused([tool("a"), tool("a")], /clientTools\[1\] \("a"\): the name is given twice/);
  refused([{ ...tool("d"), description: "x".repeat(4097) }], /\("d"\): the description is longer than 4096/);
  refused([tool("big", schema({ description: "x".repeat(33 * 1024) }))], /\("big"\): inputSchema is larger than/);
  refused(
    Array.from({ length: MAX_CLIENT_TOOLS + 1 }, (_, i) => tool(`t${i}`)),
    /more than 32 tools/,
  );
  assert.equal(validateClientTools(Array.from({ length: MAX_CLIENT_TOOLS }, (_, i) => tool(`t${i}`))).length, 32);
});

test("client tools: a schema must be a JSON Schema object Ajv compiles, with no remote reference", () => {
  const refused = (inputSchema: string, message: RegExp) =>
    assert.throws(() => validateClientTools([tool("t", inputSchema)]), message);
  refused("nope", /inputSchema is not JSON/);
  refused("[]", /must be a JSON Schema object/);
  refused('{"type":"array"}', /"type": "object"/);
  refused(schema({ properties: { a: { type: "strnig" } } }), /not a valid JSON Schema/);
  refused(schema({ required: "a" }), /not a valid JSON Schema/);
  refused(schema({ properties: { a: { $ref: "https://example.test/s.json" } } }), /can't resolve reference/);
  // Local references, and keywords Ajv does not know (annotations), are fine.
  const ok = validateClientTools([
    tool(
      "t",
      schema({
        $id: "https://example.test/same-id",
        definitions: { c: { enum: ["a", "b"] } },
        properties: { c: { $ref: "#/definitions/c" } },
        "x-ui": { widget: "radio" },
      }),
    ),
  ]);
  // The same $id in another agent's schema is that schema's own.
  validateClientTools([
    tool("u", schema({ $id: "https://example.test/same-id", properties: { n: { type: "number" } } })),
  ]);
  assert.equal(new ClientToolset(ok).check({ id: "1", name: "t", input: { c: "a" } }), undefined);
  assert.ok(new ClientToolset(ok).check({ id: "1", name: "t", input: { c: "z" } })?.isError);
});

test("client tools: an update merges by name; an empty schema removes; the bound holds after the merge", () => {
  const current = validateClientTools([tool("a"), tool("b")]);
  const merged = mergeClientTools(current, [
    tool("b", schema({ properties: { n: { type: "number" } } })),
    tool("c"),
    { name: "a", description: "", inputSchema: "" },
  ]);
  assert.deepEqual(
    merged.map((t) => t.name),
    ["b", "c"],
  );
  assert.deepEqual(merged[0]!.inputSchema, { type: "object", properties: { n: { type: "number" } } });
  const full = validateClientTools(Array.from({ length: MAX_CLIENT_TOOLS }, (_, i) => tool(`t${i}`)));
  assert.throws(() => mergeClientTools(full, [tool("one_more")]), /would have more than 32/);
  assert.throws(() => mergeClientTools(current, [tool("bash")]), /built-in/);
});

test("client tools: a call's input is checked against its schema; the error names what is wrong", () => {
  const tools = new ClientToolset(
    validateClientTools([
      tool(
        "pick",
        schema({ properties: { color: { enum: ["red"] } }, required: ["color"], additionalProperties: false }),
      ),
    ]),
  );
  assert.deepEqual(
    tools.specs.map((s) => s.name),
    ["pick"],
  );
  assert.equal(tools.check({ id: "1", name: "pick", input: { color: "red" } }), undefined);
  const missing = tools.check({ id: "1", name: "pick", input: {} });
  assert.equal(missing?.isError, true);
  assert.match(missing!.content, /input must have required property 'color'/);
  assert.match(tools.check({ id: "1", name: "pick", input: { color: "red", x: 1 } })!.content, /additional properties/);
  // What a resumed run gives the model for a call: the client's result, the schema's error, or "no result".
  const call = { id: "1", name: "pick", input: { color: "red" } };
  assert.deepEqual(clientResult(tools, call, { result: { content: "ok", isError: false } }), {
    content: "ok",
    isError: false,
  });
  assert.match(clientResult(tools, call, undefined)!.content, /no result/);
  assert.match(clientResult(tools, { ...call, input: {} }, undefined)!.content, /required property/);
  assert.equal(clientResult(tools, { id: "2", name: "bash", input: {} }, undefined), undefined, "not a client call");
});

test("client tools: patterns run in linear time; one that needs backtracking is refused when set", () => {
  for (const pattern of ["^(a)\\1$", "^(?=a)a$", "^(?<!b)a$"])
    assert.throws(
      () => validateClientTools([tool("r", schema({ properties: { s: { type: "string", pattern } } }))]),
      /\("r"\): inputSchema is not a valid JSON Schema: .*linear time/,
      pattern,
    );
  const tools = new ClientToolset(
    validateClientTools([
      tool("p", schema({ properties: { s: { type: "string", pattern: "^(a+)+$" } } })),
      tool("q", schema({ patternProperties: { "^(x+)+$": { type: "number" } } })),
    ]),
  );
  // With a backtracking engine, ^(a+)+$ on 40 a's and a b takes hours; the linear one, milliseconds.
  const started = performance.now();
  assert.match(
    tools.check({ id: "1", name: "p", input: { s: `${"a".repeat(100_000)}b` } })!.content,
    /must match pattern/,
  );
  assert.equal(tools.check({ id: "1", name: "p", input: { s: "aaa" } }), undefined);
  assert.ok(tools.check({ id: "2", name: "q", input: { [`${"x".repeat(100_000)}y`]: "s", xx: "not a number" } }));
  assert.ok(performance.now() - started < 5000, `${performance.now() - started} ms`);
});
