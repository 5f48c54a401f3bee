import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { ListBooksRequestSchema } from "@platform/gen/rpctest/v1/rpctest_pb";
import { jsonBody, messageToJson, parseBody, requestFromJson } from "./json.ts";

// Large bytes fields take Node's base64 both ways: the JSON must be exactly
// protobuf-es's, and what protobuf-es refuses stays refused.
test("large bytes fields: the same JSON and the same message as protobuf-es", () => {
  for (const size of [0, 10, 4096, 4097, 100_000, 1_000_001]) {
    const token = new Uint8Array(randomBytes(size));
    const msg = create(ListBooksRequestSchema, { token, shelf: 7n });
    const json = messageToJson(ListBooksRequestSchema, msg, { int64AsString: true });
    assert.deepEqual(json, toJson(ListBooksRequestSchema, msg), `size ${size}`);
    assert.equal(jsonBody(json).toString("utf8"), JSON.stringify(json), `size ${size}`);
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
  // Characters Node's decoder skips or stops at, wherever the length would still look right.
  for (const bad of [
    `${"A".repeat(5000)}!`,
    `${"A".repeat(4999)} ==`,
    `${"A".repeat(4996)}\u00ff${"A".repeat(4)}=`,
    `${"A".repeat(4998)}\n=`,
    `${"A".repeat(4000)}=${"A".repeat(1000)}`,
    `${"A".repeat(4999)}===`,
    `${"A".repeat(5000)}.AAA`,
  ]) {
    assert.throws(
      () => requestFromJson(ListBooksRequestSchema, { token: bad }, { ignoreUnknownFields: false }),
      /invalid base64/,
      JSON.stringify(bad.slice(-8)),
    );
  }
  // Padding protobuf-es accepts where the length says otherwise is still accepted.
  const odd = requestFromJson(
    ListBooksRequestSchema,
    { token: `${"A".repeat(4997)}=` },
    { ignoreUnknownFields: false },
  );
  assert.deepEqual(odd, fromJson(ListBooksRequestSchema, { token: `${"A".repeat(4997)}=` }));
});

test("jsonBody: the bytes of JSON.stringify, with other members, unicode and values before and after the data", () => {
  const token = new Uint8Array(randomBytes(70_000));
  const msg = create(ListBooksRequestSchema, { token, shelf: 12n });
  for (const opts of [{}, { alwaysEmitImplicit: true }, { emitNulls: true, int64AsString: true }]) {
    const json = messageToJson(ListBooksRequestSchema, msg, opts);
    assert.equal(jsonBody(json).toString("utf8"), JSON.stringify(json));
  }
  const json = messageToJson(ListBooksRequestSchema, msg) as Record<string, unknown>;
  json.extra = 'naïve \u2028 "quoted" 😀';
  json.gone = undefined;
  assert.deepEqual(jsonBody(json as never), Buffer.from(JSON.stringify(json)));
  assert.deepEqual(jsonBody({ a: [1, "é"] }), Buffer.from(JSON.stringify({ a: [1, "é"] })));
});

test("parseBody: a long base64 string cut out of the text gives the message parsing the whole text gives, or is left in", () => {
  const b64 = randomBytes(9000).toString("base64");
  const cases: Array<[string, boolean]> = [
    [`{"shelf":"7","token":"${b64}"}`, true],
    [`{"token":"${b64}","shelf":7,"pageToken":"naïve"}`, true],
    [`{"pageToken":"\\"token\\":\\"","token":"${b64}"}`, true],
    [`{"token":"${b64}","token":""}`, false],
    [`{"token":"","shelf":1,"token":"${b64}"}`, false],
    [`{"tags":["x"],"token":"${b64}"}`, false],
    [`{"token":"${b64}","pageToken":"a\\u0062"}`, false],
    [`{"token":"${b64.slice(0, 100)}\\n${b64}"}`, false],
    [`{"token":"${b64}!"}`, false],
    [`{"token":"${b64}\u00e9"}`, false],
    [`{"token":"${b64}"`, false],
    [` {"token":"${b64}"}`, false],
    [`{"token":"${b64.slice(0, 4000)}"}`, false],
  ];
  for (const [text, cuts] of cases) {
    const body = Buffer.from(text);
    const whole = () => requestFromJson(ListBooksRequestSchema, JSON.parse(text), { ignoreUnknownFields: false });
    const parsed = () => {
      const { json, cut } = parseBody(ListBooksRequestSchema, body);
      assert.equal(cut !== undefined, cuts, text.slice(0, 40));
      return requestFromJson(ListBooksRequestSchema, json, { ignoreUnknownFields: false }, cut);
    };
    let expected: unknown;
    try {
      expected = whole();
    } catch (err) {
      assert.throws(parsed, { message: (err as Error).message }, text.slice(0, 40));
      continue;
    }
    assert.deepEqual(parsed(), expected, text.slice(0, 40));
  }
});
