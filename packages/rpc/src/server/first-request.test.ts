import assert from "node:assert/strict";
import { test } from "node:test";
import { parseFirstHead } from "./first-request.ts";

// parseFirstHead reads only heads it reads exactly as Node's HTTP parser
// would; anything else is left to that parser (undefined).
const head = (s: string) => parseFirstHead(Buffer.from(s, "latin1"));

test("a whole HTTP/1.1 head: method, target, lower-cased names, trimmed values", () => {
  assert.deepEqual(
    head("POST /v1/auth/login?a=1 HTTP/1.1\r\nHost: h:1\r\nX-Request-Id:  r-1 \t\r\nContent-Length: 2\r\n\r\n{}"),
    {
      method: "POST",
      url: "/v1/auth/login?a=1",
      headers: { host: "h:1", "x-request-id": "r-1", "content-length": "2" },
    },
  );
});

test("left to the HTTP parser: not whole, another version or form, folded, repeated or malformed fields, no Host", () => {
  const refused = [
    "POST /v1 HTTP/1.1\r\nHost: h\r\n", // the head goes on in later bytes
    "POST /v1 HTTP/1.0\r\nHost: h\r\n\r\n",
    "POST http://h/v1 HTTP/1.1\r\nHost: h\r\n\r\n",
    "POST /v 1 HTTP/1.1\r\nHost: h\r\n\r\n",
    "PO(ST /v1 HTTP/1.1\r\nHost: h\r\n\r\n",
    "POST /v1 HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n  folded\r\n\r\n",
    "POST /v1 HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n",
    "POST /v1 HTTP/1.1\r\nHost: h\r\nBad Name: 1\r\n\r\n",
    "POST /v1 HTTP/1.1\r\nHost: h\r\nX-A: a\x01b\r\n\r\n",
    "POST /v1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    "POST /v1\u00e9 HTTP/1.1\r\nHost: h\r\n\r\n",
  ];
  for (const r of refused) assert.equal(head(r), undefined, JSON.stringify(r));
  // A head longer than the bound is the parser's too.
  assert.equal(parseFirstHead(Buffer.from(`GET / HTTP/1.1\r\nHost: h\r\nX: ${"a".repeat(9000)}\r\n\r\n`)), undefined);
});
