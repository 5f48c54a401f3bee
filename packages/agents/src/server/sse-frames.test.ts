import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create, type DescMethod, type Message } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type SessionEvent as SessionEventMsg,
  SessionEventSchema,
  SessionService,
} from "@platform/gen/agents/v1/agents_pb";
import { messageToJson, SseFramer, sseOf } from "@platform/rpc";

// The SSE bytes of session events, pinned: SseFramer writes them straight
// from the message (no JSON object built and trimmed), and that must stay
// byte for byte what the general path (messageToJson, the id and the fields
// outside data_fields deleted, JSON.stringify) wrote, which clients and the
// specification's examples read.

/** The agents process's REST JSON options (process.ts). */
const json = { alwaysEmitImplicit: true, emitNulls: true };

/** The frame as the general path wrote it (before the direct writer). */
function generalFrame(method: DescMethod, msg: SessionEventMsg): string {
  const opt = sseOf(method)!;
  const out = messageToJson(SessionEventSchema, msg as Message, { ...json, alwaysEmitImplicit: false }) as Record<
    string,
    unknown
  >;
  const keep = new Set(opt.dataFields.map((name) => SessionEventSchema.fields.find((f) => f.name === name)!.jsonName));
  delete out.seq;
  for (const key of Object.keys(out)) if (!keep.has(key)) delete out[key];
  const id = msg.seq !== 0n ? `id: ${msg.seq}\n` : "";
  return `${id}data: ${JSON.stringify(out)}\n\n`;
}

type Init = {
  seq: bigint;
  type: string;
  content?: string;
  tokensIn?: bigint;
  tokensOut?: bigint;
  toolUseId?: string;
  isError?: boolean;
  queuedSeq?: bigint;
};
const createdAt = timestampFromDate(new Date("2026-11-27T01:02:03.456Z"));
const big = "x".repeat(1 << 20);
const events: Array<Init> = [
  { seq: 1n, type: "user", content: "hello" },
  { seq: 2n, type: "text", content: "the quick brown fox " },
  { seq: 3n, type: "text", content: "" },
  { seq: 4n, type: "tool_use", content: '{"name":"bash","input":{"command":"echo hi"}}', toolUseId: "toolu_01" },
  {
    seq: 5n,
    type: "tool_output",
    content: JSON.stringify({ stdout: "line 1\nline 2\r\n\ttab \u0000 nul" }),
    toolUseId: "toolu_01",
  },
  { seq: 6n, type: "tool_result", content: "exit 1", toolUseId: "toolu_01", isError: true },
  { seq: 7n, type: "done", tokensIn: 1234n, tokensOut: 56n },
  // int64 past 2^53 stays a quoted string, as the general path wrote it.
  { seq: 8n, type: "done", tokensIn: 9007199254740993n, tokensOut: -5n },
  { seq: 9n, type: "user", content: "queued", queuedSeq: 4n },
  { seq: 10n, type: "text", content: 'unicode: é ü 漢字 😀 \u2028 \u2029 \ud800 lone \udfff \u001f "quoted" \\ back' },
  { seq: 11n, type: "text", content: big },
  { seq: 12n, type: "error", content: "the run was interrupted by a new message" },
  { seq: 9007199254740993n, type: "text", content: "seq beyond 2^53" },
  { seq: 0n, type: "text", content: "no seq" },
  { seq: 13n, type: "", content: "" },
];

describe("session event SSE frames", () => {
  for (const name of ["SendMessages", "StreamEvents"]) {
    const method = SessionService.methods.find((m) => m.name === name)!;
    const framer = new SseFramer(SessionEventSchema, sseOf(method)!, json);

    test(`${name}: every frame is the general path's bytes`, () => {
      for (const e of events) {
        const msg = create(SessionEventSchema, { ...e, createdAt });
        const frame = framer.frame(msg)!;
        assert.equal(frame.terminal, false);
        assert.equal(frame.text, generalFrame(method, msg), `seq ${e.seq}`);
      }
    });

    test(`${name}: the wire form, literally`, () => {
      const frame = (e: Init) => framer.frame(create(SessionEventSchema, { ...e, createdAt }))!.text;
      assert.equal(frame(events[0]!), 'id: 1\ndata: {"type":"user","content":"hello"}\n\n');
      assert.equal(
        frame(events[5]!),
        'id: 6\ndata: {"type":"tool_result","content":"exit 1","toolUseId":"toolu_01","isError":true}\n\n',
      );
      assert.equal(frame(events[6]!), 'id: 7\ndata: {"type":"done","tokensIn":1234,"tokensOut":56}\n\n');
      assert.equal(frame(events[7]!), 'id: 8\ndata: {"type":"done","tokensIn":"9007199254740993","tokensOut":-5}\n\n');
      assert.equal(frame(events[8]!), 'id: 9\ndata: {"type":"user","content":"queued","queuedSeq":4}\n\n');
      assert.equal(
        frame(events[9]!),
        `id: 10\ndata: {"type":"text","content":"unicode: é ü 漢字 😀 \u2028 \u2029 \\ud800 lone \\udfff \\u001f \\"quoted\\" \\\\ back"}\n\n`,
      );
      assert.equal(frame(events[13]!), 'data: {"type":"text","content":"no seq"}\n\n');
      assert.equal(frame(events[14]!), "id: 13\ndata: {}\n\n");
    });
  }
});
