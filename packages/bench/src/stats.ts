/** Latency samples in nanoseconds (process.hrtime.bigint differences), summarized in milliseconds. */
export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** Summary in ms of raw samples in ns. */
export function summarize(samplesNs: readonly (number | bigint)[]): Summary {
  const ms = samplesNs.map((s) => Number(s) / 1e6).sort((a, b) => a - b);
  const sum = ms.reduce((a, b) => a + b, 0);
  return {
    n: ms.length,
    p50: percentile(ms, 50),
    p90: percentile(ms, 90),
    p99: percentile(ms, 99),
    mean: ms.length ? sum / ms.length : Number.NaN,
    min: ms[0] ?? Number.NaN,
    max: ms.at(-1) ?? Number.NaN,
  };
}

export const now = (): bigint => process.hrtime.bigint();

/** Elapsed ns since `t0` as a number. */
export const since = (t0: bigint): number => Number(process.hrtime.bigint() - t0);

export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return "n/a";
  if (ms >= 100) return `${ms.toFixed(0)} ms`;
  if (ms >= 10) return `${ms.toFixed(1)} ms`;
  if (ms >= 1) return `${ms.toFixed(2)} ms`;
  return `${(ms * 1000).toFixed(0)} µs`;
}

export function fmtBytes(n: number): string {
  if (!Number.isFinite(n)) return "n/a";
  if (n >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(2)} GiB`;
  if (n >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n.toFixed(0)} B`;
}

export function fmtRate(perSecond: number, unit = "/s"): string {
  if (!Number.isFinite(perSecond)) return "n/a";
  if (perSecond >= 1e9) return `${(perSecond / 1e9).toFixed(2)} G${unit}`;
  if (perSecond >= 1e6) return `${(perSecond / 1e6).toFixed(2)} M${unit}`;
  if (perSecond >= 1e3) return `${(perSecond / 1e3).toFixed(2)} k${unit}`;
  return `${perSecond.toFixed(1)} ${unit}`;
}

export const lat = (s: Summary): string => `p50 ${fmtMs(s.p50)}, p99 ${fmtMs(s.p99)} (n=${s.n})`;
