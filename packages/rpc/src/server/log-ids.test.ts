import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, before, test } from "node:test";
import { createProbe, libraryImpl } from "../testing/fixture.ts";
import type { ServiceImpl } from "@connectrpc/connect";
import { LibraryService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { pino } from "pino";
import { createServer } from "./create-server.ts";
import { requestIdsMixin } from "./log-ids.ts";

const lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    for (const l of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(l));
    done();
  },
});
// A service's own logger, as the services make theirs: not the request's child.
const logger = pino({ level: "trace", mixin: requestIdsMixin }, sink);
const impl: ServiceImpl<typeof LibraryService> = {
  ...libraryImpl(createProbe()),
  echo(req) {
    logger.info({ text: req.text }, "handler line");
    logger.child({ requestId: "own-id" }).info("bound line");
    setTimeout(() => logger.info("later line of the same request"), 10);
    return { text: req.text };
  },
};
const server = createServer({
  name: "log-ids",
  envelope: "agents",
  logger,
  services: [{ service: LibraryService, impl }],
});
let url = "";
before(async () => {
  url = (await server.listen()).url;
});
after(() => server.close());

test("a line any logger writes while serving a request names that request's id and trace id", async () => {
  const res = await fetch(`${url}/v1/echo`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": "req-42" },
    body: JSON.stringify({ text: "hello" }),
  });
  assert.equal(res.status, 200);
  const traceId = res.headers.get("x-trace-id");
  await new Promise((r) => setTimeout(r, 50));
  const handler = lines.find((l) => l.msg === "handler line");
  assert.equal(handler?.requestId, "req-42");
  assert.equal(handler?.traceId, traceId);
  const later = lines.find((l) => l.msg === "later line of the same request");
  assert.equal(later?.requestId, "req-42");
  // A logger bound to another request id keeps its own (a line never names two requests).
  const bound = lines.find((l) => l.msg === "bound line");
  assert.equal(bound?.requestId, "own-id");
  assert.equal(bound?.traceId, undefined);
  const access = lines.find((l) => l.msg === "request");
  assert.equal(access?.requestId, "req-42");
  // Outside a request: no ids.
  logger.info("idle line");
  assert.equal(lines.find((l) => l.msg === "idle line")?.requestId, undefined);
});
