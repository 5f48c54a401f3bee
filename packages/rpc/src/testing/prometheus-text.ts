// A strict parser of Prometheus' text exposition format (0.0.4), for tests:
// no maintained npm parser is installed and prom-client ships none. It
// refuses what Prometheus itself would refuse (bad names, escapes, values,
// duplicate series, a TYPE after its samples, interleaved families, a
// histogram whose buckets are not cumulative or whose +Inf bucket is not its
// count), so a test that parses a scrape also proves the scrape is valid.

export type MetricType = "counter" | "gauge" | "histogram" | "summary" | "untyped";

export interface Sample {
  /** The sample's own name (e.g. `x_bucket` of histogram `x`). */
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help?: string;
  samples: Sample[];
}

/** A scrape that breaks the Prometheus text exposition format. */
export class ExpositionError extends Error {
  override name = "ExpositionError";
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(["counter", "gauge", "histogram", "summary", "untyped"]);

// Prometheus reads values with Go's strconv.ParseFloat, which takes NaN and
// Inf in any case (prom-client writes `Nan`).
function parseValue(text: string, where: string): number {
  const word = text.toLowerCase();
  if (word === "+inf" || word === "inf") return Number.POSITIVE_INFINITY;
  if (word === "-inf") return Number.NEGATIVE_INFINITY;
  if (word === "nan") return Number.NaN;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) throw new ExpositionError(`${where}: bad value "${text}"`);
  return Number(text);
}

function unescapeHelp(text: string, where: string): string {
  return text.replace(/\\(.?)/g, (_, c: string) => {
    if (c === "\\") return "\\";
    if (c === "n") return "\n";
    throw new ExpositionError(`${where}: bad escape in HELP`);
  });
}

/** The family a sample name belongs to, given the families declared so far. */
function familyOf(name: string, families: Map<string, Family>): string {
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const t = families.get(base)?.type;
    if (t === "histogram" || (t === "summary" && suffix !== "_bucket")) return base;
  }
  return name;
}

/** Parses one sample line: name, optional {labels}, value, optional timestamp. */
function parseSample(line: string, where: string): Sample {
  const nameEnd = line.search(/[{ ]/);
  if (nameEnd <= 0) throw new ExpositionError(`${where}: no value`);
  const name = line.slice(0, nameEnd);
  if (!METRIC_NAME.test(name)) throw new ExpositionError(`${where}: bad metric name "${name}"`);
  const labels: Record<string, string> = {};
  let i = nameEnd;
  if (line[i] === "{") {
    i++;
    while (line[i] !== "}") {
      const eq = line.indexOf("=", i);
      if (eq < 0) throw new ExpositionError(`${where}: unterminated labels`);
      const label = line.slice(i, eq);
      if (!LABEL_NAME.test(label)) throw new ExpositionError(`${where}: bad label name "${label}"`);
      if (Object.hasOwn(labels, label)) throw new ExpositionError(`${where}: label "${label}" given twice`);
      if (line[eq + 1] !== '"') throw new ExpositionError(`${where}: label value not quoted`);
      let value = "";
      let j = eq + 2;
      for (;;) {
        const c = line[j];
        if (c === undefined) throw new ExpositionError(`${where}: unterminated label value`);
        if (c === '"') break;
        if (c === "\\") {
          const e = line[j + 1];
          if (e === "\\" || e === '"') value += e;
          else if (e === "n") value += "\n";
          else throw new ExpositionError(`${where}: bad escape in label value`);
          j += 2;
        } else {
          value += c;
          j++;
        }
      }
      labels[label] = value;
      i = j + 1;
      if (line[i] === ",") i++;
      else if (line[i] !== "}") throw new ExpositionError(`${where}: expected , or } after a label`);
    }
    i++;
  }
  if (line[i] !== " ") throw new ExpositionError(`${where}: expected a space before the value`);
  const rest = line.slice(i + 1).split(" ");
  if (rest.length > 2 || rest.some((p) => p === ""))
    throw new ExpositionError(`${where}: expected a value and an optional timestamp`);
  if (rest[1] !== undefined && !/^-?\d+$/.test(rest[1])) throw new ExpositionError(`${where}: bad timestamp`);
  return { name, labels, value: parseValue(rest[0]!, where) };
}

function seriesKey(s: Sample): string {
  return `${s.name}{${Object.keys(s.labels)
    .sort()
    .map((k) => `${k}=${JSON.stringify(s.labels[k])}`)
    .join(",")}}`;
}

function checkHistogram(f: Family): void {
  const groups = new Map<string, { buckets: [number, number][]; count?: number; sum?: boolean }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { buckets: [] }));
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new ExpositionError(`${f.name}: a bucket without le`);
      g.buckets.push([parseValue(le, `${f.name} le`), s.value]);
    } else if (s.name === `${f.name}_count`) g.count = s.value;
    else if (s.name === `${f.name}_sum`) g.sum = true;
    else throw new ExpositionError(`${f.name}: unexpected sample ${s.name} in a histogram`);
  }
  for (const [key, g] of groups) {
    const sorted = [...g.buckets].sort((a, b) => a[0] - b[0]);
    for (let k = 1; k < sorted.length; k++) {
      if (sorted[k]![1] < sorted[k - 1]![1]) throw new ExpositionError(`${f.name}${key}: buckets are not cumulative`);
    }
    const inf = sorted[sorted.length - 1];
    if (!inf || inf[0] !== Number.POSITIVE_INFINITY) throw new ExpositionError(`${f.name}${key}: no +Inf bucket`);
    if (g.count === undefined || g.sum !== true) throw new ExpositionError(`${f.name}${key}: _count or _sum missing`);
    if (inf[1] !== g.count) throw new ExpositionError(`${f.name}${key}: +Inf bucket is not _count`);
  }
}

/** Parses a whole exposition into its families by name; throws ExpositionError on anything invalid. */
export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  const closed = new Set<string>();
  const typed = new Set<string>();
  let current: string | undefined;
  if (text !== "" && !text.endsWith("\n")) throw new ExpositionError("the exposition must end with a newline");
  const lines = text.split("\n");
  lines.pop();
  lines.forEach((line, n) => {
    const where = `line ${n + 1}`;
    if (line === "") return;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (!m) return; // a comment
      const [, kind, name, rest = ""] = m;
      if (!METRIC_NAME.test(name!)) throw new ExpositionError(`${where}: bad metric name "${name}"`);
      if (closed.has(name!)) throw new ExpositionError(`${where}: ${kind} of ${name} after its family ended`);
      let f = families.get(name!);
      if (f && f.samples.length > 0) throw new ExpositionError(`${where}: ${kind} of ${name} after its samples`);
      if (!f) families.set(name!, (f = { name: name!, type: "untyped", samples: [] }));
      if (current !== name && current !== undefined) closed.add(current);
      current = name;
      if (kind === "HELP") {
        if (f.help !== undefined) throw new ExpositionError(`${where}: second HELP of ${name}`);
        f.help = unescapeHelp(rest, where);
      } else {
        if (!TYPES.has(rest as MetricType)) throw new ExpositionError(`${where}: bad type "${rest}"`);
        if (typed.has(name!)) throw new ExpositionError(`${where}: second TYPE of ${name}`);
        typed.add(name!);
        f.type = rest as MetricType;
      }
      return;
    }
    const sample = parseSample(line, where);
    const name = familyOf(sample.name, families);
    if (closed.has(name)) throw new ExpositionError(`${where}: samples of ${name} are not together`);
    if (current !== name && current !== undefined) closed.add(current);
    current = name;
    let f = families.get(name);
    if (!f) families.set(name, (f = { name, type: "untyped", samples: [] }));
    const key = seriesKey(sample);
    if (seen.has(key)) throw new ExpositionError(`${where}: series ${key} given twice`);
    seen.add(key);
    f.samples.push(sample);
  });
  for (const f of families.values()) {
    if (f.type === "histogram") checkHistogram(f);
    if (f.type === "counter" && f.samples.some((s) => s.value < 0 || Number.isNaN(s.value)))
      throw new ExpositionError(`${f.name}: a counter below zero`);
  }
  return families;
}

/** The sum of the samples named `name` (family or sample name) whose labels include `labels`. */
export function sampleSum(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const f of families.values()) {
    for (const s of f.samples) {
      if (s.name !== name) continue;
      if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
    }
  }
  return sum;
}

/** Every value the label takes among the samples named `name`. */
export function labelValues(families: Map<string, Family>, name: string, label: string): Set<string> {
  const out = new Set<string>();
  for (const f of families.values()) {
    for (const s of f.samples) if (s.name === name && s.labels[label] !== undefined) out.add(s.labels[label]);
  }
  return out;
}

/** GETs `url` (a service's /metrics) with the bearer token and parses the answer strictly. */
export async function scrapeMetrics(url: string, token: string, init: RequestInit = {}) {
  const r = await fetch(url, { ...init, headers: { authorization: `Bearer ${token}` } });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`scrape of ${url}: ${r.status} ${text.slice(0, 200)}`);
  const type = r.headers.get("content-type") ?? "";
  if (!type.startsWith("text/plain; version=0.0.4")) throw new Error(`scrape of ${url}: content-type ${type}`);
  return parsePrometheusText(text);
}
