import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { ReadFileResponseSchema } from "@platform/gen/compute/v1/compute_pb";
import { VerifyTokenRequestSchema, VerifyTokenResponseSchema } from "@platform/gen/identity/v1/auth_pb";
import { fixedMessage } from "./fixed-message.ts";
import { encodeEnveloped } from "./spliced-encoding.ts";

describe("fixed messages", () => {
  test("a fixed message is frozen through and through, and written from its one encoding", () => {
    const reply = create(VerifyTokenResponseSchema, {
      context: { userId: "u", orgId: "o", method: "jwt_session", scopes: ["read"] },
    });
    const expected = toBinary(VerifyTokenResponseSchema, reply);
    // Reads of its one field tell whether the message is encoded again.
    const context = reply.context;
    let reads = 0;
    Object.defineProperty(reply, "context", {
      get() {
        reads++;
        return context;
      },
      enumerable: true,
      configurable: true,
    });
    assert.equal(fixedMessage(VerifyTokenResponseSchema, reply), reply);
    assert.ok(Object.isFrozen(reply) && Object.isFrozen(context) && Object.isFrozen(context!.scopes));
    reads = 0;
    for (let i = 0; i < 3; i++) {
      const pieces = encodeEnveloped(VerifyTokenResponseSchema, reply, { anyOrder: true });
      assert.equal(pieces.length, 1);
      assert.ok(Buffer.from(pieces[0]!).subarray(5).equals(expected));
      assert.equal(Buffer.from(pieces[0]!).readUInt32BE(1), expected.length);
    }
    assert.equal(reads, 0, "encoded again");
  });

  test("a message holding bytes, or given with another type, is not fixed", () => {
    const file = create(ReadFileResponseSchema, { data: new Uint8Array([1, 2]), totalSize: 2n });
    fixedMessage(ReadFileResponseSchema, file);
    assert.ok(!Object.isFrozen(file));
    const request = create(VerifyTokenRequestSchema, { token: "t" });
    fixedMessage(VerifyTokenResponseSchema, request as never);
    assert.ok(!Object.isFrozen(request));
  });
});
