// sessions.get() returns the whole log although GetSession answers a page at
// a time (issue 26): the pages are read in order until none is left, on an
// in-memory SessionService that pages like the agents service.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { SessionEventSchema, SessionSchema, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { SessionsApi } from "./client.ts";

const LOG = 2_345;
const PAGE = 1_000;

test("get() walks every page: all events, in order, once; the first page's session and pending calls", async () => {
  const asked: string[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(SessionService, {
      getSession(req) {
        asked.push(req.pageToken);
        const from = req.pageToken ? Number(req.pageToken.slice(1)) : 0;
        const to = Math.min(LOG, from + PAGE);
        return {
          session: create(SessionSchema, { id: req.id, lastSeq: BigInt(LOG) }),
          events: Array.from({ length: to - from }, (_, i) =>
            create(SessionEventSchema, { seq: BigInt(from + i + 1), type: "text" }),
          ),
          pendingToolCalls: from === 0 ? [{ toolUseId: "toolu_1" }] : [],
          ...(to < LOG ? { nextPageToken: `p${to}` } : {}),
        };
      },
    });
  });
  const sessions = new SessionsApi(createClient(SessionService, transport), undefined, {});
  const { session, events, pendingToolCalls } = await sessions.get("s1");
  assert.deepEqual(asked, ["", "p1000", "p2000"]);
  assert.equal(session.id, "s1");
  assert.deepEqual(
    events.map((e) => Number(e.seq)),
    Array.from({ length: LOG }, (_, i) => i + 1),
  );
  assert.deepEqual(
    pendingToolCalls.map((c) => c.toolUseId),
    ["toolu_1"],
  );
});
