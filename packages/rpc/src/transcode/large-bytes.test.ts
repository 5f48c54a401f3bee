import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { ListBooksRequestSchema } from "@platform/gen/rpctest/v1/rpctest_pb";
import { messageToJson, requestFromJson } from "./json.ts";

// Large bytes fields take Node's base64 both ways: the JSON must be exactly
// protobuf-es's, and what protobuf-es refuses stays refused.
test("large bytes fields: the same JSON and the same message as protobuf-es", () => {
  for (const size of [0, 10, 4096, 4097, 100_000, 1_000_001]) {
    const token = new Uint8Array(randomBytes(size));
    const msg = create(ListBooksRequestSchema, { token, shelf: 7n });
    const json = messageToJson(ListBooksRequestSchema, msg, { int64AsString: true });
    assert.deepEqual(json, toJson(ListBooksRequestSchema, msg), `size ${size}`);
    const back = requestFromJson(ListBooksRequestSchema, structuredClone(json), { ignoreUnknownFields: false });
    assert.deepEqual(back, fromJson(ListBooksRequestSchema, json), `size ${size}`);
    assert.deepEqual(Buffer.from((back as unknown as { token: Uint8Array }).token), Buffer.from(token));
  }
  // URL-safe alphabet and no padding, as proto3 JSON allows.
  const raw = randomBytes(6000);
  const urlSafe = raw.toString("base64url");
  const decoded = requestFromJson(
    ListBooksRequestSchema,
    { token: urlSafe },
    { ignoreUnknownFields: false },
  ) as unknown as { token: Uint8Array };
  assert.deepEqual(Buffer.from(decoded.token), raw);
  assert.throws(
    () => requestFromJson(ListBooksRequestSchema, { token: `${"A".repeat(5000)}!` }, { ignoreUnknownFields: false }),
    /invalid base64/,
  );
});
