import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { create, equals, fromBinary, type Message, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  ComputeService,
  type ExecEvent,
  ExecEventSchema,
  ReadFileResponseSchema,
} from "@platform/gen/compute/v1/compute_pb";
import { VerifyTokenResponseSchema } from "@platform/gen/identity/v1/auth_pb";
import { encodeEnveloped, SPLICE_MIN_BYTES, spliceEncode } from "./spliced-encoding.ts";

// The driver's largest exec output event (compute's MAX_EVENT_BYTES).
const MAX_CHUNK = 1 << 20;

function stdout(data: Uint8Array, emittedAtMs = 1_795_000_000_123): ExecEvent {
  return create(ExecEventSchema, {
    emittedAt: emittedAtMs === 0 ? undefined : timestampFromMs(emittedAtMs),
    event: { case: "stdout", value: { data } },
  });
}

/** Exec output of every size that matters: empty, small, both sides of the threshold, the largest. */
function events(): ExecEvent[] {
  return [
    stdout(new Uint8Array(0)),
    stdout(randomBytes(1)),
    stdout(randomBytes(SPLICE_MIN_BYTES - 1)),
    stdout(randomBytes(SPLICE_MIN_BYTES)),
    stdout(randomBytes(SPLICE_MIN_BYTES + 1), 0),
    stdout(randomBytes(MAX_CHUNK)),
    create(ExecEventSchema, {
      emittedAt: timestampFromMs(1),
      event: { case: "stderr", value: { data: randomBytes(300_000) } },
    }),
    create(ExecEventSchema, {
      emittedAt: timestampFromMs(2),
      event: { case: "completed", value: { exitCode: 3, wallTime: { seconds: 1n, nanos: 5 } } },
    }),
  ];
}

function joined(pieces: Uint8Array[]): Buffer {
  return Buffer.concat(pieces);
}

describe("spliced encoding", () => {
  test("its bytes are toBinary's, and the large field is the message's own array", () => {
    for (const ev of events()) {
      const generic = toBinary(ExecEventSchema, ev);
      const spliced = spliceEncode(ExecEventSchema, ev);
      const data = ev.event.case === "stdout" || ev.event.case === "stderr" ? ev.event.value.data : undefined;
      if (data === undefined || data.length < SPLICE_MIN_BYTES) {
        assert.equal(spliced, undefined, `${ev.event.case} of ${data?.length}: not spliced`);
      } else {
        assert.ok(spliced, `${ev.event.case} of ${data.length}: spliced`);
        assert.equal(spliced.tail, data, "the payload is referenced, not copied");
        assert.equal(spliced.length, generic.length);
        assert.ok(joined([spliced.head, spliced.tail]).equals(generic), `${data.length}: bytes equal toBinary's`);
      }
      const enveloped = joined(encodeEnveloped(ExecEventSchema, ev));
      assert.equal(enveloped[0], 0);
      assert.equal(enveloped.readUInt32BE(1), generic.length);
      assert.ok(enveloped.subarray(5).equals(generic));
      assert.ok(equals(ExecEventSchema, fromBinary(ExecEventSchema, enveloped.subarray(5)), ev));
    }
  });

  test("a large field that toBinary does not write last is left to toBinary", () => {
    const data = randomBytes(SPLICE_MIN_BYTES * 2);
    // data is field 1; total_size (2) and eof (3) come after it.
    const behind = create(ReadFileResponseSchema, { data, totalSize: 9n, eof: true });
    assert.equal(spliceEncode(ReadFileResponseSchema, behind), undefined);
    assert.ok(
      joined(encodeEnveloped(ReadFileResponseSchema, behind))
        .subarray(5)
        .equals(toBinary(ReadFileResponseSchema, behind)),
    );
    const alone = create(ReadFileResponseSchema, { data });
    const spliced = spliceEncode(ReadFileResponseSchema, alone);
    assert.ok(spliced && joined([spliced.head, spliced.tail]).equals(toBinary(ReadFileResponseSchema, alone)));
    const unknown = stdout(data);
    unknown.$unknown = [{ no: 99, wireType: 0, data: new Uint8Array([1]) }];
    assert.equal(spliceEncode(ExecEventSchema, unknown), undefined);
  });

  test("anyOrder: a large field that is not the last goes out last, referenced, and decodes to the same message", () => {
    const data = randomBytes(SPLICE_MIN_BYTES * 2);
    const behind = create(ReadFileResponseSchema, { data, totalSize: 9n, eof: true });
    const spliced = spliceEncode(ReadFileResponseSchema, behind, { anyOrder: true });
    assert.ok(spliced);
    assert.equal(spliced.tail, data, "the payload is referenced, not copied");
    const bytes = joined([spliced.head, spliced.tail]);
    assert.equal(bytes.length, toBinary(ReadFileResponseSchema, behind).length);
    assert.ok(equals(ReadFileResponseSchema, fromBinary(ReadFileResponseSchema, bytes), behind));
    const enveloped = joined(encodeEnveloped(ReadFileResponseSchema, behind, { anyOrder: true }));
    assert.equal(enveloped.readUInt32BE(1), bytes.length);
    assert.ok(equals(ReadFileResponseSchema, fromBinary(ReadFileResponseSchema, enveloped.subarray(5)), behind));
    // Below the threshold it is toBinary's bytes, as without the option.
    const small = create(ReadFileResponseSchema, { data: randomBytes(10), totalSize: 9n });
    assert.equal(spliceEncode(ReadFileResponseSchema, small, { anyOrder: true }), undefined);
  });

  test("a message whose type holds no bytes field is read only by toBinary", () => {
    // VerifyToken's reply: a message field, strings, enums, a list; no bytes at any depth.
    const reply = create(VerifyTokenResponseSchema, {
      context: { userId: "u", orgId: "o", method: "jwt_session", scopes: ["read"] },
    });
    const reads = (encode: (m: Message) => void) => {
      let n = 0;
      const counted = <T extends object>(o: T): T =>
        new Proxy(o, {
          get(target, key, receiver) {
            n++;
            const v = Reflect.get(target, key, receiver) as unknown;
            return key === "context" && v ? counted(v as object) : v;
          },
        });
      encode(counted(reply));
      return n;
    };
    const byToBinary = reads((m) => toBinary(VerifyTokenResponseSchema, m as never));
    const enveloped = reads((m) => encodeEnveloped(VerifyTokenResponseSchema, m, { anyOrder: true }));
    assert.equal(enveloped, byToBinary, "encodeEnveloped reads no field before toBinary does");
    assert.ok(
      Buffer.from(joined(encodeEnveloped(VerifyTokenResponseSchema, reply)).subarray(5)).equals(
        toBinary(VerifyTokenResponseSchema, reply),
      ),
    );
  });

  test("the message it is given is left as it was", () => {
    const ev = stdout(randomBytes(MAX_CHUNK));
    const before = toBinary(ExecEventSchema, ev);
    spliceEncode(ExecEventSchema, ev);
    assert.equal(ev.event.case, "stdout");
    assert.ok(Buffer.from(toBinary(ExecEventSchema, ev)).equals(before));
  });
});

/**
 * ExecCommand answered with encodeEnveloped's pieces (or with toBinary's
 * bytes, `?generic`) in each protocol's framing, so the Connect client of
 * each protocol decodes exactly what the fast path writes.
 */
function rawExecServer(sent: ExecEvent[]): http2.Http2Server {
  return http2.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const type = String(req.headers["content-type"]);
      const generic = req.headers["x-encoding"] === "generic";
      const grpc = type === "application/grpc" || type === "application/grpc+proto";
      if (grpc) res.addTrailers({ "grpc-status": "0" });
      res.writeHead(200, { "content-type": type });
      for (const ev of sent) {
        if (generic) {
          const body = toBinary(ExecEventSchema, ev);
          const prefix = Buffer.alloc(5);
          prefix.writeUInt32BE(body.length, 1);
          res.write(Buffer.concat([prefix, body]));
        } else {
          for (const piece of encodeEnveloped(ExecEventSchema, ev)) res.write(piece);
        }
      }
      if (type.startsWith("application/grpc-web")) res.end(endFrame(0x80, "grpc-status: 0\r\n"));
      else if (type.startsWith("application/connect")) res.end(endFrame(0x02, "{}"));
      else res.end();
    });
  });
}

function endFrame(flags: number, text: string): Buffer {
  const body = Buffer.from(text);
  const f = Buffer.alloc(5 + body.length);
  f[0] = flags;
  f.writeUInt32BE(body.length, 1);
  f.set(body, 5);
  return f;
}

describe("spliced encoding through the Connect clients", () => {
  const sent = events();
  let server: http2.Http2Server;
  let baseUrl = "";
  const sessions = new Set<http2.ServerHttp2Session>();
  before(async () => {
    server = rawExecServer(sent);
    server.on("session", (s) => {
      sessions.add(s);
      s.on("close", () => sessions.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    // The clients keep their HTTP/2 sessions open; close() waits for them.
    for (const s of sessions) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const transports: Record<string, (headers?: Record<string, string>) => Transport> = {
    grpc: () => createGrpcTransport({ baseUrl, readMaxBytes: 4 << 20 }),
    "grpc-web": () => createGrpcWebTransport({ baseUrl, httpVersion: "2", readMaxBytes: 4 << 20 }),
    connect: () => createConnectTransport({ baseUrl, httpVersion: "2", readMaxBytes: 4 << 20 }),
  };

  for (const [protocol, transport] of Object.entries(transports)) {
    test(`${protocol}: the fast path's messages decode to what the generic encoder's do`, async () => {
      const client = createClient(ComputeService, transport());
      const read = async (encoding: string) => {
        const got: ExecEvent[] = [];
        for await (const ev of client.execCommand({ sandboxId: "s" }, { headers: { "x-encoding": encoding } })) {
          got.push(ev);
        }
        return got;
      };
      const fast = await read("fast");
      const generic = await read("generic");
      assert.equal(fast.length, sent.length);
      assert.equal(generic.length, sent.length);
      for (let i = 0; i < sent.length; i++) {
        assert.ok(equals(ExecEventSchema, fast[i]!, generic[i]!), `${protocol} message ${i}: fast = generic`);
        assert.ok(equals(ExecEventSchema, fast[i]!, sent[i]!), `${protocol} message ${i}: fast = sent`);
      }
    });
  }
});
