/**
 * Parses a Go-style duration string ("30s", "1h30m", "250ms") into
 * milliseconds, the form the specification gives its time settings in. A bare
 * integer is read as seconds, which is what operators most often mean.
 */
export function parseDuration(raw: string): number | undefined {
  const text = raw.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;
  let total = 0;
  let matched = 0;
  while (re.lastIndex < text.length) {
    const m = re.exec(text);
    if (!m) return undefined;
    total += Number(m[1]) * unit[m[2]!]!;
    matched++;
  }
  return matched > 0 ? Math.round(total) : undefined;
}
