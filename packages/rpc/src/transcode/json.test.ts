import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { BookSchema } from "@platform/gen/rpctest/v1/rpctest_pb";
import { messageToJson } from "./json.ts";

test("emitNulls writes null for unset message fields and leaves set ones alone", () => {
  const unset = create(BookSchema, { name: "shelves/1/books/2", pages: 3n });
  assert.deepEqual(messageToJson(BookSchema, unset), { name: "shelves/1/books/2", pages: 3 });
  assert.deepEqual(messageToJson(BookSchema, unset, { emitNulls: true }), {
    name: "shelves/1/books/2",
    pages: 3,
    publishedAt: null,
  });
  const set = create(BookSchema, { publishedAt: timestampFromDate(new Date("2026-01-02T03:04:05Z")) });
  assert.deepEqual(messageToJson(BookSchema, set, { emitNulls: true }), { publishedAt: "2026-01-02T03:04:05Z" });
});
