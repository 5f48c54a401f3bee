import assert from "node:assert/strict";
import { test } from "node:test";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";

test("equality, inequality, set-based and existence requirements all must match", () => {
  const labels = { app: "web", tier: "front", "runtime.platform.io/tenant": "true" };
  const cases: Array<[string, boolean]> = [
    ["", true],
    ["app=web", true],
    ["app==web", true],
    ["app=api", false],
    ["app!=api", true],
    ["missing!=x", true],
    ["app in (api, web)", true],
    ["app notin (web)", false],
    ["missing notin (web)", true],
    ["tier", true],
    ["!tier", false],
    ["!missing", true],
    ["runtime.platform.io/tenant=true,app=web", true],
    ["runtime.platform.io/tenant=true,app=api", false],
  ];
  for (const [sel, want] of cases) assert.equal(parseLabelSelector(sel)(labels), want, sel);
});

test("an unparsable selector is a 400 BadRequest", () => {
  assert.throws(
    () => parseLabelSelector("a in b"),
    (e: { code: number; status: { reason: string } }) => e.code === 400 && e.status.reason === "BadRequest",
  );
});

test("field selectors on metadata.name and metadata.namespace", () => {
  const obj = { metadata: { name: "a", namespace: "ns" } };
  assert.equal(parseFieldSelector("metadata.name=a")(obj), true);
  assert.equal(parseFieldSelector("metadata.name!=a")(obj), false);
  assert.equal(parseFieldSelector("metadata.namespace=ns,metadata.name=b")(obj), false);
  assert.throws(() => parseFieldSelector("spec.nodeName=x"));
});
