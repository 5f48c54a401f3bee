import { ConfigError } from "./config-error.ts";
import { parseDuration } from "./duration.ts";
import { type Env, type Field, raw } from "./field.ts";

type Doc = { doc: string; shown?: string };

function field<T>(name: string, shown: string, doc: string, read: (env: Env) => T): Field<T> {
  return { names: [name], shown, doc, read };
}

/** A free-text setting: with a default, required, or optional (undefined when unset). */
export function text(name: string, o: Doc & { default: string }): Field<string>;
export function text(name: string, o: Doc & { required: true }): Field<string>;
export function text(name: string, o: Doc): Field<string | undefined>;
export function text(name: string, o: Doc & { default?: string; required?: boolean }): Field<string | undefined> {
  const shown = o.shown ?? (o.default !== undefined ? `\`${o.default}\`` : o.required ? "required" : "unset");
  return field(name, shown, o.doc, (env) => {
    const v = raw(env, name);
    if (v === undefined && o.required) throw new ConfigError(name, `${name} is required`);
    return v ?? o.default;
  });
}

type IntOptions = Doc & {
  min: number;
  max?: number;
  /** Words that stand for a number (`off` → 0). */
  words?: Readonly<Record<string, number>>;
};

/** A whole number within [min, max]; optional (undefined when unset) without a default. */
export function int(name: string, o: IntOptions & { default: number }): Field<number>;
export function int(name: string, o: IntOptions): Field<number | undefined>;
export function int(name: string, o: IntOptions & { default?: number }): Field<number | undefined> {
  const shown = o.shown ?? (o.default !== undefined ? String(o.default) : "unset");
  return field(name, shown, o.doc, (env) => {
    const v = raw(env, name);
    if (v === undefined) return o.default;
    if (o.words && Object.hasOwn(o.words, v)) return o.words[v];
    const n = /^-?\d+$/.test(v) ? Number(v) : Number.NaN;
    const range = o.max === undefined ? `of at least ${o.min}` : `from ${o.min} to ${o.max}`;
    if (!Number.isSafeInteger(n) || n < o.min || (o.max !== undefined && n > o.max))
      throw new ConfigError(name, `${name} must be an integer ${range}, got ${JSON.stringify(v)}`);
    return n;
  });
}

/** A TCP port to listen on; 0 picks a free one unless min says otherwise. */
export function port(name: string, o: Doc & { default: number; min?: number }): Field<number> {
  const min = o.min ?? 0;
  return field(name, o.shown ?? String(o.default), o.doc, (env) => {
    const v = raw(env, name);
    if (v === undefined) return o.default;
    const n = /^\d+$/.test(v) ? Number(v) : Number.NaN;
    if (!(n >= min && n <= 65535))
      throw new ConfigError(name, `${name} must be a port number (${min}-65535), got ${JSON.stringify(v)}`);
    return n;
  });
}

type DurationOptions<W> = Doc & { minMs?: number; words?: Readonly<Record<string, W>> };

/**
 * Milliseconds from a Go-style duration (`30s`, `1h30m`, `250ms`; a bare
 * number is seconds); optional (undefined when unset) without a default.
 */
export function duration<W extends number | undefined = never>(
  name: string,
  o: DurationOptions<W> & { default: number },
): Field<number | W>;
export function duration<W extends number | undefined = never>(
  name: string,
  o: DurationOptions<W>,
): Field<number | W | undefined>;
export function duration<W extends number | undefined = never>(
  name: string,
  o: DurationOptions<W> & { default?: number },
): Field<number | W | undefined> {
  const minMs = o.minMs ?? 1;
  const shown = o.shown ?? (o.default !== undefined ? formatDuration(o.default) : "unset");
  return field(name, shown, o.doc, (env) => {
    const v = raw(env, name);
    if (v === undefined) return o.default;
    if (o.words && Object.hasOwn(o.words, v)) return o.words[v] as W;
    const ms = parseDuration(v);
    if (ms === undefined)
      throw new ConfigError(name, `${name} must be a duration such as 30s, 5m or 1h, got ${JSON.stringify(v)}`);
    if (ms < minMs) throw new ConfigError(name, `${name} must be at least ${minMs} ms`);
    return ms;
  });
}

/** The largest unit that divides the value: 3600000 → `1h`, 90000 → `90s`. */
export function formatDuration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

const TRUE = ["1", "true", "on"];
const FALSE = ["0", "false", "off"];

/** On or off: 1/0, true/false or on/off, in any case. */
export function bool(name: string, o: Doc & { default: boolean }): Field<boolean> {
  return field(name, o.shown ?? (o.default ? "on" : "off"), o.doc, (env) => {
    const v = raw(env, name)?.toLowerCase();
    if (v === undefined) return o.default;
    if (TRUE.includes(v)) return true;
    if (FALSE.includes(v)) return false;
    throw new ConfigError(name, `${name} must be 1 or 0 (true/false, on/off), got ${JSON.stringify(env[name])}`);
  });
}

/** One of a fixed set of words. */
export function oneOf<const T extends string>(name: string, values: readonly T[], o: Doc & { default: T }): Field<T> {
  return field(name, o.shown ?? `\`${o.default}\``, o.doc, (env) => {
    const v = raw(env, name);
    if (v === undefined) return o.default;
    if (!(values as readonly string[]).includes(v))
      throw new ConfigError(name, `${name} must be one of ${values.join(", ")}, got ${JSON.stringify(v)}`);
    return v as T;
  });
}

type UrlOptions = Doc & {
  /** Accepted schemes, e.g. ["http:", "https:"]; any when absent. */
  protocols?: readonly string[];
  /** Never echo the value (a database URL carries a password). */
  secret?: boolean;
};

/** An absolute URL; optional (undefined when unset) unless required. */
export function url(name: string, o: UrlOptions & { required: true }): Field<string>;
export function url(name: string, o: UrlOptions): Field<string | undefined>;
export function url(name: string, o: UrlOptions & { required?: boolean }): Field<string | undefined> {
  const shown = o.shown ?? (o.required ? "required" : "unset");
  return field(name, shown, o.doc, (env) => {
    const v = raw(env, name);
    if (v === undefined) {
      if (o.required) throw new ConfigError(name, `${name} is required`);
      return undefined;
    }
    checkUrl(name, v, o);
    return v;
  });
}

/** Throws the ConfigError of a value that is not a URL of one of the protocols. */
export function checkUrl(name: string, value: string, o: { protocols?: readonly string[]; secret?: boolean }): void {
  let protocol: string | undefined;
  try {
    protocol = new URL(value).protocol;
  } catch {}
  if (protocol !== undefined && (!o.protocols || o.protocols.includes(protocol))) return;
  const kind = o.protocols ? `${o.protocols.map((p) => `${p}//`).join(" or ")} URL` : "URL";
  const article = kind.startsWith("h") ? "an" : "a";
  const got = o.secret ? "" : `, got ${JSON.stringify(value)}`;
  throw new ConfigError(name, `${name} must be ${article} ${kind}${got}`);
}

/** A comma-separated list; empty when unset. */
export function list(name: string, o: Doc): Field<string[]> {
  return field(name, o.shown ?? "unset", o.doc, (env) =>
    (raw(env, name) ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== ""),
  );
}

/**
 * A setting read by code of its own (a shared library's reader, a rule over
 * several variables); listed like the others. `read` should throw ConfigError.
 */
export function custom<T>(names: string | readonly string[], o: Doc & { shown: string; read: (env: Env) => T }) {
  const all = typeof names === "string" ? [names] : names;
  return { names: all, shown: o.shown, doc: o.doc, read: o.read } satisfies Field<T>;
}

/** A retired variable: refused when set, naming the one that replaced it; not listed. */
export function replaced(name: string, by: string, why: string): Field<undefined> {
  return {
    ...field(name, "", "", (env) => {
      if (raw(env, name) !== undefined) throw new ConfigError(name, `${name} was replaced by ${by} (${why})`);
      return undefined;
    }),
    hidden: true,
  };
}
