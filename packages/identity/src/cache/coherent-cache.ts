/**
 * A bounded map of answers read from the database (least recently used
 * entry dropped beyond `max`), for data that changes rarely and is read on
 * every authenticated call. Correctness comes from invalidation: the writer
 * in this process drops the entry synchronously, other replicas' writes
 * arrive as notifications (invalidation-listener.ts). `maxAgeMs` only bounds
 * the damage of a notification lost without the listener noticing.
 */
export class CoherentCache<K, V> {
  readonly #entries = new Map<K, { value: V; at: number; order: number }>();
  // Bumped by every invalidation: a load that overlapped one may have read
  // the old row, so its answer is returned but not kept.
  #generation = 0;
  // Counts the entries put at the recent end of #entries (inserts and moves): an entry's `order` is
  // this count when it was put there, so #order - order is how many went in after it.
  #order = 0;

  constructor(
    private readonly gate: { readonly enabled: boolean },
    private readonly max: number,
    private readonly maxAgeMs = Number.POSITIVE_INFINITY,
  ) {}

  /**
   * A hit is moved to the recent end only once more than half of `max`
   * entries went in after it: a least recently used entry is still dropped
   * first among the older half, and the hot entries of a verification
   * (every call's) are not deleted and re-inserted on every hit, which made
   * V8 rebuild the map's table on every call or two (its garbage was ~1 KB a
   * VerifyAPIKey call).
   */
  get(key: K): V | undefined {
    if (!this.gate.enabled) return undefined;
    const hit = this.#entries.get(key);
    if (!hit) return undefined;
    if (performance.now() - hit.at > this.maxAgeMs) {
      this.#entries.delete(key);
      return undefined;
    }
    if (this.#order - hit.order > this.max / 2) {
      this.#entries.delete(key);
      hit.order = ++this.#order;
      this.#entries.set(key, hit);
    }
    return hit.value;
  }

  /** The cached value, else `load()`'s, kept unless undefined (absence is never cached) or invalidated meanwhile. */
  async through(key: K, load: () => Promise<V | undefined>): Promise<V | undefined> {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const generation = this.#generation;
    const value = await load();
    if (value !== undefined && this.gate.enabled && generation === this.#generation) {
      this.#entries.delete(key);
      this.#entries.set(key, { value, at: performance.now(), order: ++this.#order });
      if (this.#entries.size > this.max) this.#entries.delete(this.#entries.keys().next().value as K);
    }
    return value;
  }

  invalidate(key: K): void {
    this.#generation++;
    this.#entries.delete(key);
  }

  invalidateWhere(match: (value: V, key: K) => boolean): void {
    this.#generation++;
    for (const [key, { value }] of this.#entries) if (match(value, key)) this.#entries.delete(key);
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
  }

  get size(): number {
    return this.#entries.size;
  }
}
