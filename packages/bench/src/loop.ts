/**
 * Runs `body(i)` until `n` iterations or `budgetMs` elapsed (at least
 * `minN` iterations), alternating the baseline and the measurement when the
 * body does both: on a shared noisy machine both see the same noise.
 */
export async function repeat(
  opts: { n: number; budgetMs: number; minN?: number },
  body: (i: number) => Promise<void>,
): Promise<number> {
  const deadline = Date.now() + opts.budgetMs;
  let i = 0;
  for (; i < opts.n; i++) {
    if (i >= (opts.minN ?? 1) && Date.now() > deadline) break;
    await body(i);
  }
  return i;
}

/** Runs `worker` on `concurrency` lanes until `durationMs` passed; returns completed operations. */
export async function saturate(
  concurrency: number,
  durationMs: number,
  worker: () => Promise<void>,
): Promise<{ ops: number; seconds: number }> {
  const t0 = performance.now();
  const end = t0 + durationMs;
  let ops = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await worker();
        ops++;
      }
    }),
  );
  return { ops, seconds: (performance.now() - t0) / 1000 };
}

export const ratio = (measured: number, baseline: number): string =>
  Number.isFinite(measured) && Number.isFinite(baseline) && baseline > 0
    ? `${(measured / baseline).toFixed(2)}×`
    : "n/a";

export const pct = (measured: number, baseline: number): string =>
  Number.isFinite(measured) && Number.isFinite(baseline) && baseline > 0
    ? `${((measured / baseline) * 100).toFixed(1)} %`
    : "n/a";
