/** The environment a service reads its settings from. */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * One setting: the variables it reads, how its default is shown, what it is
 * for, and how it is read. The same declaration reads the value and writes
 * the row of the settings listing, so the two cannot drift.
 */
export interface Field<T> {
  /** The variables of this row; a row may document several read together (the TLS files). */
  readonly names: readonly string[];
  /** The default as the listing shows it (`required`, `unset`, `8081`, ...). */
  readonly shown: string;
  readonly doc: string;
  /** Left out of the listing (a retired variable that is only refused). */
  readonly hidden?: boolean;
  read(env: Env): T;
}

/** The value of every field of a declaration object, by key. */
export type Values<F> = { [K in keyof F]: F[K] extends Field<infer T> ? T : never };

/** The variable's value, trimmed; an empty or blank value counts as unset. */
export function raw(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

/**
 * Reads every field in declaration order; the first missing or invalid one
 * throws its ConfigError.
 */
export function readSettings<F extends Record<string, Field<unknown>>>(fields: F, env: Env): Values<F> {
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(fields)) out[key] = field.read(env);
  return out as Values<F>;
}
