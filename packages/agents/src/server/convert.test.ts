import assert from "node:assert/strict";
import { test } from "node:test";
import { create, toBinary, toJson } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { SessionEventSchema } from "@platform/gen/agents/v1/agents_pb";
import type { SessionEvent } from "../domain/model.ts";
import { eventToProto } from "./convert.ts";

// eventToProto writes the message out instead of calling create(): it must
// stay exactly what create() made, field for field and in the same order.

function viaCreate(e: SessionEvent) {
  return create(SessionEventSchema, {
    seq: BigInt(e.seq),
    type: e.type,
    content: e.content,
    tokensIn: BigInt(e.tokensIn),
    tokensOut: BigInt(e.tokensOut),
    toolUseId: e.toolUseId,
    isError: e.isError,
    createdAt: timestampFromDate(e.createdAt),
    queuedSeq: BigInt(e.queuedSeq ?? 0),
  });
}

test("eventToProto is the message create() makes (fields, their order, the timestamp; binary and JSON alike)", () => {
  const base: SessionEvent = {
    seq: 7,
    type: "text",
    content: "hello",
    tokensIn: 0,
    tokensOut: 0,
    toolUseId: "",
    isError: false,
    createdAt: new Date("2026-11-27T08:15:21.123Z"),
  };
  const cases: SessionEvent[] = [
    base,
    { ...base, seq: 2 ** 40, type: "done", tokensIn: 12, tokensOut: 3_000_000, runId: "r" },
    { ...base, type: "user", queuedSeq: 5, toolUseId: "toolu_1", isError: true },
    { ...base, queuedSeq: 0, createdAt: new Date(-1500) },
    { ...base, createdAt: new Date(0) },
  ];
  for (const e of cases) {
    const ours = eventToProto(e);
    const theirs = viaCreate(e);
    assert.deepStrictEqual(ours, theirs);
    assert.deepEqual(Object.keys(ours), Object.keys(theirs));
    assert.deepEqual(Object.keys(ours.createdAt!), Object.keys(theirs.createdAt!));
    assert.deepEqual(toBinary(SessionEventSchema, ours), toBinary(SessionEventSchema, theirs));
    assert.deepEqual(toJson(SessionEventSchema, ours), toJson(SessionEventSchema, theirs));
  }
});
