import { CoherentCache } from "./coherent-cache.ts";

/** Kinds of change notified on AUTH_CHANNEL as `<kind>:<id>` (migration 0002's triggers). */
export type ChangeKind = "m" | "k" | "s";

/**
 * The verification caches of one identity process and the switch that
 * makes them safe: they are used only while every write that could stale
 * them is seen, that is always with the embedded database (one process
 * owns it) and, with PostgreSQL, while the invalidation listener is
 * connected. Losing the listener empties and bypasses them.
 */
export class AuthCaches {
  #enabled: boolean;
  readonly #caches: CoherentCache<unknown, unknown>[] = [];
  readonly #handlers = new Map<string, Array<(id: string) => void>>();

  constructor(options: { enabled: boolean }) {
    this.#enabled = options.enabled;
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  create<K, V>(max: number, maxAgeMs?: number): CoherentCache<K, V> {
    const cache = new CoherentCache<K, V>(this, max, maxAgeMs);
    this.#caches.push(cache as CoherentCache<unknown, unknown>);
    return cache;
  }

  /** Runs `handler(id)` for every change of `kind`, from this process or another replica. */
  on(kind: ChangeKind, handler: (id: string) => void): void {
    this.#handlers.set(kind, [...(this.#handlers.get(kind) ?? []), handler]);
  }

  changed(kind: ChangeKind, id: string): void {
    for (const handler of this.#handlers.get(kind) ?? []) handler(id);
  }

  /** A notification payload `<kind>:<id>`. */
  apply(payload: string): void {
    const colon = payload.indexOf(":");
    if (colon > 0) this.changed(payload.slice(0, colon) as ChangeKind, payload.slice(colon + 1));
  }

  enable(): void {
    this.#clear();
    this.#enabled = true;
  }

  disable(): void {
    this.#enabled = false;
    this.#clear();
  }

  #clear(): void {
    for (const cache of this.#caches) cache.clear();
  }
}
