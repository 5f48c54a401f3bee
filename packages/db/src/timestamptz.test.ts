import assert from "node:assert/strict";
import { test } from "node:test";
import pg from "pg";
import "./connect.ts";
import { parseTimestamptz } from "./timestamptz.ts";

/** `text` as PostgreSQL writes a timestamptz with DateStyle ISO in a zone `offsetSeconds` east of UTC. */
function pgText(utcMs: number, micros: number, offsetSeconds: number): string {
  const local = new Date(utcMs + offsetSeconds * 1000);
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  const fraction = (local.getUTCMilliseconds() * 1000 + micros).toString().padStart(6, "0").replace(/0+$/, "");
  const abs = Math.abs(offsetSeconds);
  let zone = `${offsetSeconds < 0 ? "-" : "+"}${p(Math.floor(abs / 3600))}`;
  if (abs % 3600) zone += `:${p(Math.floor((abs % 3600) / 60))}`;
  if (abs % 60) zone += `:${p(abs % 60)}`;
  return `${p(local.getUTCFullYear(), 4)}-${p(local.getUTCMonth() + 1)}-${p(local.getUTCDate())} ${p(local.getUTCHours())}:${p(local.getUTCMinutes())}:${p(local.getUTCSeconds())}${fraction ? `.${fraction}` : ""}${zone}`;
}

const refuse = (text: string) => {
  throw new Error(`fell back on ${text}`);
};

test("ISO timestamptz text reads as the instant it names, to the millisecond (microseconds truncated), in any zone", () => {
  let seed = 7;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const offsets = [0, 3600, -8 * 3600, 5 * 3600 + 1800, -(9 * 3600 + 30 * 60), 14 * 3600, -(3600 + 60 + 15)];
  for (let k = 0; k < 20_000; k++) {
    const utcMs = Date.UTC(100 + rand(9800), rand(12), 1 + rand(28), rand(24), rand(60), rand(60), rand(1000));
    const micros = rand(3) === 0 ? 0 : rand(1000);
    const offset = offsets[k % offsets.length] as number;
    const text = pgText(utcMs, micros, offset);
    const parsed = parseTimestamptz(text, refuse) as Date;
    assert.equal(parsed.getTime(), utcMs, text);
  }
});

test("what it does not read goes to the fallback: infinity, BC, years before 100, another style, junk", () => {
  const seen: string[] = [];
  const fallback = (text: string) => {
    seen.push(text);
    return "fallback";
  };
  const others = [
    "infinity",
    "-infinity",
    "0099-06-01 12:00:00+00",
    "2020-01-01 00:00:00+00 BC",
    "2026-11-26T22:36:16Z",
    "Thu Nov 26 22:36:16 2026 UTC",
    "2026-11-26 22:36:16",
    "2026-11-26 22:36:16.5+0x",
    "2026-1a-26 22:36:16+00",
  ];
  for (const text of others) assert.equal(parseTimestamptz(text, fallback), "fallback", text);
  assert.deepEqual(seen, others);
});

test("the parser pg uses reads PostgreSQL's forms as JavaScript's own ISO reading does", () => {
  const ours = pg.types.getTypeParser(1184, "text");
  for (const text of [
    "2026-11-26 22:36:16.123456+00",
    "2026-11-26 22:36:16+00",
    "2026-01-02 03:04:05.5+05:30",
    "1999-12-31 23:59:59.999-08",
    "2000-02-29 00:00:00.000001-03:30:15",
  ]) {
    const a = ours(text) as Date;
    const b = new Date(
      text
        .replace(" ", "T")
        .replace(/([+-]\d\d)$/, "$1:00")
        .replace(/([+-]\d\d:\d\d):\d\d$/, "$1"),
    );
    if (!text.endsWith(":15")) assert.equal(a.getTime(), b.getTime(), text);
    assert.ok(a instanceof Date && !Number.isNaN(a.getTime()), text);
  }
});
