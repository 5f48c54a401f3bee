import type { Counter, Gauge, Histogram, LabelValues } from "prom-client";

/**
 * A label set's series of a counter and a histogram (or of a gauge), found
 * once and then added to directly: prom-client's inc/observe validate the
 * labels and build their hash string on every call (four times for each
 * call a server answers: its RPC and its HTTP request, each counted and
 * timed). The first use of a series, and any use after it was reset or
 * removed, or with a value prom-client refuses, goes through prom-client's
 * own inc/observe; the exported values are the same either way
 * (series.test.ts compares the two). Written against prom-client 15's
 * hashMap entries ({ value } for counters and gauges, { sum, count,
 * bucketValues } for histograms); an entry of another shape takes the
 * ordinary path.
 */
interface CounterEntry {
  value: number;
}
interface HistogramEntry {
  sum: number;
  count: number;
  bucketValues: Record<number, number>;
}
interface Stored<E> {
  hashMap: Record<string, E | undefined>;
  upperBounds?: number[];
}

/** The hash prom-client files `labels` under in a metric with these label names (its util's fastHashObject). */
function hashOf(labelNames: readonly string[], labels: Record<string, string | number | undefined>): string {
  let hash = "";
  for (const key of [...labelNames].sort()) {
    const value = labels[key];
    if (value !== undefined) hash += `${key}:${value},`;
  }
  return hash;
}

function counterEntry(metric: unknown, hash: string): CounterEntry | undefined {
  const e = (metric as Stored<CounterEntry>).hashMap?.[hash];
  return e !== undefined && typeof e.value === "number" ? e : undefined;
}

/** One label set of a counter and a histogram of the same label names: one call counted and timed. */
export class TimedSeries<T extends string> {
  readonly #hash: string;
  readonly #bounds: number[] | undefined;

  constructor(
    private readonly counter: Counter<T>,
    private readonly histogram: Histogram<T>,
    labelNames: readonly T[],
    private readonly labels: LabelValues<T>,
  ) {
    this.#hash = hashOf(labelNames, labels);
    const bounds = (histogram as unknown as Stored<HistogramEntry>).upperBounds;
    this.#bounds = Array.isArray(bounds) ? bounds : undefined;
  }

  /** Counts one and observes `seconds`. */
  add(seconds: number): void {
    const c = counterEntry(this.counter, this.#hash);
    if (c) c.value += 1;
    else this.counter.inc(this.labels);
    const h = (this.histogram as unknown as Stored<HistogramEntry>).hashMap?.[this.#hash];
    const bounds = this.#bounds;
    if (h === undefined || bounds === undefined || typeof h.sum !== "number" || !Number.isFinite(seconds)) {
      this.histogram.observe(this.labels, seconds);
      return;
    }
    h.sum += seconds;
    h.count += 1;
    // The first bucket whose upper bound holds it; above the last one only the count (+Inf) has it.
    for (let i = 0; i < bounds.length; i++) {
      const bound = bounds[i]!;
      if (seconds <= bound) {
        if (Object.hasOwn(h.bucketValues, bound)) h.bucketValues[bound]! += 1;
        break;
      }
    }
  }
}

/** One label set of a gauge: inc and dec. */
export class GaugeSeries<T extends string> {
  readonly #hash: string;

  constructor(
    private readonly gauge: Gauge<T>,
    labelNames: readonly T[],
    private readonly labels: LabelValues<T>,
  ) {
    this.#hash = hashOf(labelNames, labels);
  }

  inc(): void {
    const e = counterEntry(this.gauge, this.#hash);
    if (e) e.value += 1;
    else this.gauge.inc(this.labels);
  }

  dec(): void {
    const e = counterEntry(this.gauge, this.#hash);
    if (e) e.value -= 1;
    else this.gauge.dec(this.labels);
  }
}

/** The map under `key` in `m`, made on first use (label values keyed level by level: no key string per lookup). */
export function level<V>(m: Map<string, Map<string, V>>, key: string): Map<string, V> {
  let next = m.get(key);
  if (!next) {
    next = new Map();
    m.set(key, next);
  }
  return next;
}
