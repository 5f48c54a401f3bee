// The console's logic without a browser: the usage chart's days, requests and
// stacked bars; what each role is offered on the members screen; the
// invitation link; a send made during a run in the chat.
import assert from "node:assert/strict";
import { test } from "node:test";
import { chatItems, type ViewEvent } from "../app/events.ts";
import { acceptLink, acceptToken, ownersLeft, roleRights } from "../app/screens/team-rules.ts";
import { formatValue, mapLimit, niceMax, stackBars, utcDays } from "../app/usage-data.ts";

test("usage: the last n UTC days, oldest first, each [00:00, next 00:00)", () => {
  const days = utcDays(new Date("2026-03-01T23:30:00-05:00"), 3); // 04:30 UTC on 2 March
  assert.deepEqual(
    days.map((d) => d.label),
    ["2026-02-28", "2026-03-01", "2026-03-02"],
  );
  assert.equal(days[0]!.since, "2026-02-28T00:00:00.000Z");
  assert.equal(days[0]!.until, "2026-03-01T00:00:00.000Z");
  assert.equal(days[2]!.until, "2026-03-03T00:00:00.000Z");
  for (let i = 1; i < days.length; i++) assert.equal(days[i]!.since, days[i - 1]!.until, "no gap, no overlap");
});

test("usage: bars stacked per agent in series order, zero values leave no segment, a round axis", () => {
  const days = utcDays(new Date("2026-03-02T12:00:00Z"), 2);
  const series = [
    {
      agentId: "a",
      name: "A",
      days: [
        { tokens: 30, sandboxMs: 0 },
        { tokens: 0, sandboxMs: 5 },
      ],
    },
    {
      agentId: "b",
      name: "B",
      days: [
        { tokens: 70, sandboxMs: 1 },
        { tokens: 90, sandboxMs: 0 },
      ],
    },
  ];
  const { bars, max } = stackBars(series, days, "tokens");
  assert.equal(max, 100);
  assert.deepEqual(
    bars[0]!.segments.map((s) => [s.name, s.y0, s.y1]),
    [
      ["A", 0, 30],
      ["B", 30, 100],
    ],
  );
  assert.deepEqual(
    bars[1]!.segments.map((s) => [s.name, s.y0, s.y1]),
    [["B", 0, 90]],
  );
  assert.equal(stackBars(series, days, "sandboxMs").max, 5);
  assert.deepEqual([0, 0.3, 7, 10, 11, 4200].map(niceMax), [1, 0.5, 10, 10, 20, 5000]);
  assert.equal(formatValue("sandboxMs", 1500), "1.5 s");
  assert.equal(formatValue("sandboxMs", 800), "800 ms");
  assert.equal(formatValue("tokens", 12_345), "12k");
});

test("usage: requests run at most `limit` at once and keep their order", async () => {
  let open = 0;
  let most = 0;
  const out = await mapLimit([5, 1, 4, 2, 3, 0, 6], 3, async (n) => {
    open++;
    most = Math.max(most, open);
    await new Promise((r) => setTimeout(r, n * 3));
    open--;
    return n * 10;
  });
  assert.deepEqual(out, [50, 10, 40, 20, 30, 0, 60]);
  assert.equal(most, 3);
});

test("members: owners are offered every action, members none (identity refuses them: owners only)", () => {
  assert.deepEqual(roleRights("owner"), { viewMembers: true, invite: true, changeRoles: true, removeMembers: true });
  for (const role of ["member", "", "admin"]) {
    assert.deepEqual(roleRights(role), { viewMembers: false, invite: false, changeRoles: false, removeMembers: false });
  }
  assert.equal(ownersLeft([{ role: "owner" }, { role: "member" }]), 1);
});

test("invitations: the link carries the token in the fragment, read back intact", () => {
  const token = "inv_AbC-_x/y+z=";
  const link = acceptLink("http://127.0.0.1:8080", token);
  assert.match(link, /^http:\/\/127\.0\.0\.1:8080\/#\/accept\//);
  assert.equal(new URL(link).pathname, "/", "nothing of the token in the path sent to the server");
  const route = new URL(link).hash.replace(/^#\/?/, "").split("/");
  assert.equal(acceptToken(route), token);
  assert.equal(acceptToken(["accept"]), undefined);
  assert.equal(acceptToken(["agents", "x"]), undefined);
});

test("chat: a send made during a run is a note saying whether it interrupts", () => {
  const ev = (seq: number, type: string, content = ""): ViewEvent => ({
    seq,
    type,
    content,
    toolUseId: "",
    isError: false,
  });
  const items = chatItems([
    ev(1, "user", "first"),
    ev(2, "message_queued", JSON.stringify({ messages: [{ role: "user", content: "second" }], mode: "interrupt" })),
    ev(3, "error", "the run was interrupted by a new message"),
    ev(4, "user", "second"),
    ev(5, "message_queued", JSON.stringify({ messages: [], mode: "enqueue" })),
  ]);
  assert.deepEqual(
    items.map((i) => [i.kind, "text" in i ? i.text : ""]),
    [
      ["user", "first"],
      ["note", "message sent while the agent worked (interrupting the run)"],
      ["error", "the run was interrupted by a new message"],
      ["user", "second"],
      ["note", "message sent while the agent worked (queued)"],
    ],
  );
});
