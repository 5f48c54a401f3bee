import * as http from "node:http";
import { type Curve, curveRow, fmtCount, flatCurve, linearCurve } from "../curve.ts";
import type { Figure, Size } from "../figure.ts";
import { HttpLoadClient } from "../http-load-client.ts";
import { repeat } from "../loop.ts";
import { fmtBytes, fmtMs, now, type Summary, since, summarize } from "../stats.ts";

export const LOG_SIZES: Record<Size, number[]> = { quick: [10, 100], full: [10, 1000, 10_000, 100_000] };
/** Text of each seeded event: about a streamed fragment of a model's reply. */
const EVENT_BYTES = 200;
/** The stated constants: what a replay may add to the agents process's RSS, in all and per event of the log. */
const MAX_REPLAY_RSS_GROWTH = 32 * 1024 * 1024;
const MAX_REPLAY_BYTES_PER_EVENT = 50;

/** GET `path` as an SSE stream to its end, keeping only the ids: time to the first event, to the end, and the ids' count and order. */
function replay(
  base: string,
  path: string,
  token: string,
): Promise<{ firstNs: number; totalNs: number; events: number; lastId: number; inOrder: boolean }> {
  const t0 = now();
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${base}${path}`,
      { headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" } },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return reject(new Error(`replay: ${res.statusCode}`));
        }
        let firstNs = 0;
        let events = 0;
        let lastId = 0;
        let inOrder = true;
        let tail = Buffer.alloc(0);
        res.on("data", (chunk: Buffer) => {
          const buf = tail.length > 0 ? Buffer.concat([tail, chunk]) : chunk;
          const cut = buf.lastIndexOf(10);
          // A copy: a slice would keep the chunk alive.
          tail = Buffer.from(buf.subarray(cut + 1));
          for (const m of buf.toString("latin1", 0, cut + 1).matchAll(/^id: (\d+)$/gm)) {
            if (firstNs === 0) firstNs = since(t0);
            const id = Number(m[1]);
            if (id !== lastId + 1) inOrder = false;
            lastId = id;
            events++;
          }
        });
        res.on("end", () => resolve({ firstNs, totalNs: since(t0), events, lastId, inOrder }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
  });
}

/** GET `path` as an SSE stream until its first event, then hang up: the time to that event. */
function firstEvent(base: string, path: string, token: string): Promise<number> {
  const t0 = now();
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${base}${path}`,
      { headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" }, agent: false },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return reject(new Error(`replay: ${res.statusCode}`));
        }
        let text = "";
        res.setEncoding("latin1");
        res.on("data", (chunk: string) => {
          text += chunk;
          if (/^id: 1$/m.test(text)) {
            resolve(since(t0));
            req.destroy();
          }
        });
        res.on("end", () => reject(new Error("replay ended before its first event")));
      },
    );
    req.on("error", reject);
  });
}

type Row = {
  n: number;
  sessionId: string;
  page10: Summary;
  firstPage: Summary;
  firstPageEvents: number;
  replayFirst: Summary;
  replayTotal: Summary;
  usPerEvent: number;
  rssGrowth: number;
  heapGrowth: number;
  liveHeapGrowth: number;
};

/**
 * GetSession and the SSE replay of a session whose log holds 10, 1k, 10k,
 * 100k events (written straight into the agents database): GetSession's
 * first page (a page of 10 events, the same at every size, and the default
 * page of up to 1,000), the replay's time to its first event and to its
 * end, and how much the agents process's RSS grows during a replay. A
 * read's cost must not grow with the log: GetSession pages it with a keyset
 * read, the replay streams it a page at a time with backpressure.
 */
export const sessionLogCurve: Figure = {
  id: "curve-session-log",
  title: "curve: GetSession and SSE replay vs events in the session's log",
  goal: `GetSession page and replay first-event p50 at 100k events ≤ 2× at 10; replay µs/event at 100k ≤ 2× at 1k; replay RSS growth ≤ ${MAX_REPLAY_BYTES_PER_EVENT} B per event and ≤ ${fmtBytes(MAX_REPLAY_RSS_GROWTH)}`,
  fullTimeoutMs: 420_000,
  // Alone (--only) it starts the services itself; at toy size the rest takes a few seconds.
  quickTimeoutMs: 60_000,
  async run(stack, size) {
    const agents = await stack.agents();
    const { access_token: token } = await stack.login();
    const base = agents.urls.url!;
    const auth = { authorization: `Bearer ${token}` };
    const client = new HttpLoadClient(base, 1);
    const quick = size === "quick";
    const rows: Row[] = [];
    try {
      for (const n of LOG_SIZES[size]) {
        const sessionId = await stack.newSession(token, "dev/echo");
        await agents.request("seedLog", 600_000, { sessionId, count: n, bytes: EVENT_BYTES });
        const get = async (query: string, expect: number) => {
          const t0 = now();
          const r = await client.request("GET", `/v1/sessions/${sessionId}${query}`, undefined, auth);
          const ns = since(t0);
          if (r.status !== 200) throw new Error(`GetSession: ${r.status} ${r.text.slice(0, 200)}`);
          const page = JSON.parse(r.text) as { events: unknown[]; nextPageToken?: string | null };
          if (page.events.length !== expect || Boolean(page.nextPageToken) !== n > expect)
            throw new Error(`GetSession${query}: ${page.events.length} events, next ${page.nextPageToken}`);
          return ns;
        };
        const sample = async (query: string, expect: number) => {
          for (let i = 0; i < (quick ? 2 : 5); i++) await get(query, expect);
          const samples: number[] = [];
          await repeat({ n: quick ? 5 : 200, budgetMs: quick ? 300 : 15_000, minN: quick ? 3 : 10 }, async () => {
            samples.push(await get(query, expect));
          });
          return summarize(samples);
        };
        const page10 = await sample("?pageSize=10", Math.min(n, 10));
        const firstPageEvents = Math.min(n, 1000);
        const firstPage = await sample("", firstPageEvents);

        // Whole replays, one at a time, the agents process's memory polled along the way.
        const totals: number[] = [];
        let rssGrowth = 0;
        let heapGrowth = 0;
        const reps = quick ? 1 : n >= 100_000 ? 3 : n >= 10_000 ? 5 : 10;
        for (let i = 0; i < reps; i++) {
          await agents.request("gc");
          const before = await agents.stats();
          let polling = true;
          const poll = (async () => {
            while (polling) {
              const s = await agents.stats();
              rssGrowth = Math.max(rssGrowth, s.rss - before.rss);
              heapGrowth = Math.max(heapGrowth, s.heapUsed - before.heapUsed);
              await new Promise((r) => setTimeout(r, 50));
            }
          })();
          const r = await replay(base, `/v1/sessions/${sessionId}/events?after=0`, token).finally(() => {
            polling = false;
          });
          await poll;
          if (r.events !== n || r.lastId !== n || !r.inOrder)
            throw new Error(`replay of ${n}: ${r.events} events, last id ${r.lastId}, in order ${r.inOrder}`);
          totals.push(r.totalNs);
        }
        // One more replay for the live heap: a full GC in the agents process every 500 ms, then its heap.
        let liveHeapGrowth = 0;
        {
          await agents.request("gc");
          const before = await agents.stats();
          let polling = true;
          const poll = (async () => {
            while (polling) {
              await new Promise((r) => setTimeout(r, 500));
              await agents.request("gc");
              const s = await agents.stats();
              liveHeapGrowth = Math.max(liveHeapGrowth, s.heapUsed - before.heapUsed);
            }
          })();
          const r = await replay(base, `/v1/sessions/${sessionId}/events?after=0`, token).finally(() => {
            polling = false;
          });
          await poll;
          if (r.events !== n) throw new Error(`replay of ${n}: ${r.events} events`);
        }
        const replayTotal = summarize(totals);
        rows.push({
          n,
          sessionId,
          page10,
          firstPage,
          firstPageEvents,
          replayFirst: summarize([]),
          replayTotal,
          usPerEvent: (replayTotal.p50 * 1000) / n,
          rssGrowth,
          heapGrowth,
          liveHeapGrowth,
        });
      }
      // Time to the first event, once every log is written, the sizes in
      // turn: timed in sequence, each size came right after its own seeding
      // and reads, and the ratio followed what they left, not the log's length.
      const firsts = rows.map(() => [] as number[]);
      const openFirst = (r: Row) => firstEvent(base, `/v1/sessions/${r.sessionId}/events?after=0`, token);
      for (let i = 0; i < (quick ? 1 : 3); i++) for (const r of rows) await openFirst(r);
      await repeat({ n: quick ? 3 : 50, budgetMs: (quick ? 300 : 10_000) * rows.length, minN: 3 }, async () => {
        for (const [i, r] of rows.entries()) firsts[i]!.push(await openFirst(r));
      });
      for (const [i, r] of rows.entries()) r.replayFirst = summarize(firsts[i]!);
    } finally {
      client.close();
    }

    const xs = { label: "events in the session's log", scale: "log" as const };
    const pts = (f: (r: Row) => number, from = 0) => rows.filter((r) => r.n >= from).map((r) => ({ x: r.n, y: f(r) }));
    const load = { name: "first page (events)", values: rows.map((r) => String(r.firstPageEvents)) };
    const getSession = flatCurve({
      id: "session-log-getsession",
      title: "GetSession vs events in the session's log",
      x: xs,
      y: { label: "GET /v1/sessions/{id}", unit: "ms" },
      series: [
        { name: "page of 10 p50", points: pts((r) => r.page10.p50) },
        { name: "page of 10 p99", points: pts((r) => r.page10.p99) },
        { name: "first page p50", points: pts((r) => r.firstPage.p50) },
        { name: "first page p99", points: pts((r) => r.firstPage.p99) },
      ],
      columns: [load],
      judged: "page of 10 p50",
      notes:
        "GetSession over REST, one request at a time on one keep-alive connection: `?pageSize=10` (the same 10 events at every size) and the default first page (up to 1,000 events, with nextPageToken past that).",
    });
    const replayFirst = flatCurve({
      id: "session-log-replay-first",
      title: "SSE replay: time to the first event vs events in the log",
      x: xs,
      y: { label: "GET /v1/sessions/{id}/events?after=0, to its first event", unit: "ms" },
      series: [{ name: "p50", points: pts((r) => r.replayFirst.p50) }],
      judged: "p50",
      notes:
        "Streams opened one at a time and closed at their first event, after every size's log was written and read, the sizes taken in turn in each round.",
    });
    // Per event, from the smallest size where the replay is more than its set-up.
    const from = rows.length > 2 ? (rows.find((r) => r.n >= 1000)?.n ?? 0) : 0;
    const replayPerEvent = flatCurve({
      id: "session-log-replay-per-event",
      title: "SSE replay: time per event vs events in the log",
      x: xs,
      y: { label: "whole replay p50 / events", unit: "µs" },
      series: [{ name: "µs/event", points: pts((r) => r.usPerEvent, from) }],
      columns: [
        { name: "whole replay p50", values: rows.filter((r) => r.n >= from).map((r) => fmtMs(r.replayTotal.p50)) },
      ],
      judged: "µs/event",
    });
    const memory = (judged: "RSS growth" | "live heap growth", id: string, what: string, notes: string) =>
      linearCurve({
        id,
        title: `SSE replay: agents ${what} vs events in the log`,
        x: xs,
        y: { label: `agents ${what} during a replay`, unit: "bytes" },
        series: [
          { name: "RSS growth", points: pts((r) => r.rssGrowth) },
          { name: "heap growth", points: pts((r) => r.heapGrowth) },
          { name: "live heap growth", points: pts((r) => r.liveHeapGrowth) },
        ],
        judged,
        maxSlope: MAX_REPLAY_BYTES_PER_EVENT,
        // Expected flat (a page at a time): the slope is held to the constant, the fit's R² is not asked for.
        minR2: 0,
        slopeLabel: "per event of the log",
        notes,
      });
    const replayRss = memory(
      "RSS growth",
      "session-log-replay-rss",
      "RSS growth",
      `The agents process's peak RSS and V8 heap (garbage included) during a replay over their values after a GC before it, polled every 50 ms; also at most ${fmtBytes(MAX_REPLAY_RSS_GROWTH)} at any size. Holding the log would cost its ${EVENT_BYTES} B of text per event and more.`,
    );
    const replayLive = memory(
      "live heap growth",
      "session-log-replay-live-heap",
      "live heap growth",
      "The agents process's V8 heap after a full GC, every 500 ms of a replay of its own, over its value before: what the replay holds, garbage excluded.",
    );
    const curves: Curve[] = [getSession, replayFirst, replayPerEvent, replayRss, replayLive];
    const maxRss = Math.max(...rows.map((r) => r.rssGrowth));
    const table = [
      "| events | GetSession page of 10 p50 / p99 | first page (events) p50 / p99 | replay first event p50 | replay whole p50 | µs/event | agents RSS growth (heap) | live heap growth |",
      "|---:|---|---|---|---|---:|---|---|",
      ...rows.map(
        (r) =>
          `| ${fmtCount(r.n)} | ${fmtMs(r.page10.p50)} / ${fmtMs(r.page10.p99)} | ${fmtMs(r.firstPage.p50)} / ${fmtMs(r.firstPage.p99)} (${r.firstPageEvents}) | ${fmtMs(r.replayFirst.p50)} | ${fmtMs(r.replayTotal.p50)} | ${r.usPerEvent.toFixed(1)} | ${fmtBytes(r.rssGrowth)} (${fmtBytes(r.heapGrowth)}) | ${fmtBytes(r.liveHeapGrowth)} |`,
      ),
    ].join("\n");
    const row = curveRow(getSession, "page of 10 p50", {
      raw: { rows, maxRss },
      notes: `On ${stack.databaseKind}; events of ${EVENT_BYTES} B written straight into the agents database. ${curves.map((c) => `${c.title}: ${c.met ? "met" : "missed"} (${c.verdict})`).join("; ")}.\n\n${table}`,
    });
    return {
      ...row,
      met: curves.every((c) => c.met === true) && maxRss <= MAX_REPLAY_RSS_GROWTH,
      curves,
    };
  },
};
