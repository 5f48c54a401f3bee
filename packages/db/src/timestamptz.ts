// timestamptz as PostgreSQL sends it in text (DateStyle ISO, the default):
// `2026-11-26 22:36:16.123456+00`, the offset `+05:30` or `-08` in other
// session time zones. pg's parser (postgres-date) runs three regular
// expressions per value, 5.5 % of the agents service's CPU under the mixed
// load of issue 15, where every event row carries one; this reads the fixed
// positions instead and hands anything else (BC, infinity, years before 100,
// another DateStyle) to pg's own parser.
import pg from "pg";

const TIMESTAMPTZ_OID = 1184;
const ZERO = 48;

/** Two decimal digits at i, or NaN when either is not a digit. */
function twoDigits(s: string, i: number): number {
  const a = s.charCodeAt(i) - ZERO;
  const b = s.charCodeAt(i + 1) - ZERO;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : Number.NaN;
}

/** A Date for an ISO-style timestamptz, milliseconds truncated like pg's parser; `fallback` for any other text. */
export function parseTimestamptz(s: string, fallback: (text: string) => unknown): unknown {
  const n = s.length;
  if (n < 22 || s[4] !== "-" || s[7] !== "-" || s[10] !== " " || s[13] !== ":" || s[16] !== ":") return fallback(s);
  const year = twoDigits(s, 0) * 100 + twoDigits(s, 2);
  let i = 19;
  let ms = 0;
  if (s[i] === ".") {
    i++;
    // Milliseconds are the first three digits; further ones are read past (truncation).
    for (let scale = 100; i < n; i++, scale /= 10) {
      const digit = s.charCodeAt(i) - ZERO;
      if (digit < 0 || digit > 9) break;
      if (scale >= 1) ms += digit * scale;
    }
  }
  const sign = s[i] === "+" ? 1 : s[i] === "-" ? -1 : 0;
  if (sign === 0 || !(year >= 100)) return fallback(s);
  let offset = twoDigits(s, i + 1) * 3600;
  i += 3;
  if (s[i] === ":") {
    offset += twoDigits(s, i + 1) * 60;
    i += 3;
  }
  if (s[i] === ":") {
    offset += twoDigits(s, i + 1);
    i += 3;
  }
  if (i !== n) return fallback(s);
  const utc = Date.UTC(
    year,
    twoDigits(s, 5) - 1,
    twoDigits(s, 8),
    twoDigits(s, 11),
    twoDigits(s, 14),
    twoDigits(s, 17),
    ms,
  );
  const time = utc - sign * offset * 1000;
  return Number.isNaN(time) ? fallback(s) : new Date(time);
}

/** Makes pg parse timestamptz with parseTimestamptz (pg's own parser for what it does not read). */
export function installTimestamptzParser(): void {
  const pgParser = pg.types.getTypeParser(TIMESTAMPTZ_OID, "text");
  pg.types.setTypeParser(TIMESTAMPTZ_OID, (text: string) => parseTimestamptz(text, pgParser));
}
