import assert from "node:assert/strict";
import { test } from "node:test";
import { type Json, jsonPatch, mergePatch, strategicMergePatch } from "./patch.ts";

test("merge patch sets, overwrites and removes keys with null, keeps the rest", () => {
  const doc = { metadata: { annotations: { a: "1", b: "2" }, labels: { x: "y" } } };
  assert.deepEqual(mergePatch(doc, { metadata: { annotations: { b: "3", a: null, c: "4" } } }), {
    metadata: { annotations: { b: "3", c: "4" }, labels: { x: "y" } },
  });
});

test("strategic merge patch merges containers and env by name instead of replacing the list", () => {
  const doc: Json = {
    spec: {
      containers: [
        { name: "a", image: "1", env: [{ name: "X", value: "1" }] },
        { name: "b", image: "2" },
      ],
    },
  };
  const out = strategicMergePatch(doc, { spec: { containers: [{ name: "a", env: [{ name: "Y", value: "2" }] }] } });
  assert.deepEqual(out, {
    spec: {
      containers: [
        {
          name: "a",
          image: "1",
          env: [
            { name: "X", value: "1" },
            { name: "Y", value: "2" },
          ],
        },
        { name: "b", image: "2" },
      ],
    },
  });
  // The same patch as a JSON merge patch replaces the list.
  assert.deepEqual(mergePatch(doc, { spec: { containers: [{ name: "a" }] } }), {
    spec: { containers: [{ name: "a" }] },
  });
  const deleted = strategicMergePatch(doc, { spec: { containers: [{ name: "b", $patch: "delete" }] } }) as {
    spec: { containers: unknown[] };
  };
  assert.equal(deleted.spec.containers.length, 1);
});

test("json patch add/replace/remove/test, and a failed test aborts", () => {
  const doc = { metadata: { annotations: { a: "1" } }, spec: { replicas: 1 } };
  assert.deepEqual(
    jsonPatch(doc, [
      { op: "test", path: "/spec/replicas", value: 1 },
      { op: "replace", path: "/spec/replicas", value: 3 },
      { op: "add", path: "/metadata/annotations/x~1y", value: "2" },
      { op: "remove", path: "/metadata/annotations/a" },
    ]),
    { metadata: { annotations: { "x/y": "2" } }, spec: { replicas: 3 } },
  );
  assert.throws(() => jsonPatch(doc, [{ op: "test", path: "/spec/replicas", value: 2 }]));
});
