/**
 * A Map's values taken a few at a time, each call going on from where the
 * last one stopped and wrapping round: work over every entry (the memory
 * sampler's) spread over calls, each call bounded whatever the Map's size.
 */
export class Turns<T> {
  /** A Map iterator sees entries added after it was made and skips deleted ones. */
  private cursor?: Iterator<T>;

  constructor(private readonly items: Map<unknown, T>) {}

  /** Up to limit values for which wanted holds, none twice; fewer when a whole round finds no more. */
  take(limit: number, wanted: (item: T) => boolean): T[] {
    const taken: T[] = [];
    for (let seen = 0; taken.length < limit && seen < this.items.size; seen++) {
      let next = this.cursor?.next();
      if (!next || next.done) {
        this.cursor = this.items.values();
        next = this.cursor.next();
        if (next.done) break;
      }
      if (wanted(next.value)) taken.push(next.value);
    }
    return taken;
  }
}
