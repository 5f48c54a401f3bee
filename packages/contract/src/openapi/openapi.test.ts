import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import { ruleOf } from "../../../identity/src/server/policies.ts";
import { scopeOf } from "../../../agents/src/server/scopes.ts";
import { routesOf } from "../routes.ts";
import {
  agentsSurface,
  identitySurface,
  loadProtoComments,
  openApiDocument,
  routerSurface,
  type Schema,
} from "./index.ts";

const genDir = new URL("../../../../gen/openapi/", import.meta.url);
const surfaces = [identitySurface(ruleOf), agentsSurface(scopeOf), routerSurface()];
const comments = loadProtoComments(new URL("../../../../", import.meta.url).pathname);
const committed = (name: string): Schema => JSON.parse(readFileSync(new URL(`${name}.json`, genDir), "utf8"));

for (const surface of surfaces) {
  test(`gen/openapi/${surface.name}.json is a valid OpenAPI 3.1 document`, async () => {
    const doc = committed(surface.name);
    assert.equal(doc.openapi, "3.1.0");
    const result = await new Validator().validate(doc);
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
  });

  test(`gen/openapi/${surface.name}.json is what the generator makes of gen/ (pnpm gen)`, () => {
    assert.deepEqual(committed(surface.name), JSON.parse(JSON.stringify(openApiDocument(surface, comments))));
  });

  test(`every google.api.http route of ${surface.name}'s services is in its document, with its status`, () => {
    const doc = committed(surface.name);
    const paths = doc.paths as Record<string, Record<string, Schema>>;
    const routes = routesOf(surface.services);
    assert.ok(routes.length > 0);
    for (const r of routes) {
      const path = r.path.replace(/\{([^}=]+)(=[^}]*)?\}/g, "{$1}");
      const op = paths[path]?.[r.verb.toLowerCase()];
      assert.ok(op, `${r.verb} ${r.path} (${r.rpc}) documented`);
      const responses = op.responses as Record<string, Schema>;
      assert.ok(responses[String(r.status)], `${r.verb} ${r.path}: ${r.status} documented`);
      const content = responses[String(r.status)]!.content as Record<string, unknown> | undefined;
      if (r.sse) assert.deepEqual(Object.keys(content ?? {}), ["text/event-stream"], `${r.verb} ${r.path} is SSE`);
      else if (r.status === 204) assert.equal(content, undefined);
      else if (r.raw && r.verb === "GET")
        assert.deepEqual(Object.keys(content ?? {}), ["application/json", "application/octet-stream"], r.path);
      else assert.deepEqual(Object.keys(content ?? {}), ["application/json"]);
      if (r.raw && r.body !== "") {
        const body = (op.requestBody as Schema).content as Record<string, unknown>;
        assert.deepEqual(Object.keys(body), ["application/json", "application/octet-stream"], r.path);
      }
    }
    const documented = Object.entries(paths).flatMap(([, item]) => Object.keys(item));
    // The contract's routes, the three health endpoints and /openapi.json.
    assert.equal(documented.length, routes.length + 4);
  });
}

test("a request field and a response field are described the way the services write them", () => {
  const agents = committed("agents").components as { schemas: Record<string, Schema> };
  const agent = agents.schemas["agents.v1.Agent"]!;
  // lowerCamelCase, every field written (alwaysEmitImplicit), timestamps as RFC 3339 or null.
  assert.ok((agent.required as string[]).includes("systemPrompt"));
  assert.deepEqual((agent.properties as Record<string, Schema>).createdAt, {
    anyOf: [{ type: "string", format: "date-time", description: "RFC 3339, UTC (`Z`)." }, { type: "null" }],
  });
  const identity = committed("identity").components as { schemas: Record<string, Schema> };
  const pair = identity.schemas["identity.v1.TokenPair"]!;
  // snake_case json_name; int64 as a number (a string only beyond 2^53); zero fields omitted (not required).
  assert.deepEqual(Object.keys(pair.properties as object), [
    "access_token",
    "token_type",
    "expires_in",
    "refresh_token",
  ]);
  assert.deepEqual((pair.properties as Record<string, Schema>).expires_in!.type, ["integer", "string"]);
  assert.equal(pair.required, undefined);
  // The two envelopes.
  assert.deepEqual((identity.schemas.Error!.required as string[]).sort(), ["code", "message"]);
  assert.deepEqual(agents.schemas.Error!.required, ["error"]);
});
