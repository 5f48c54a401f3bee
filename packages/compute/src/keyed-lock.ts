/**
 * One operation at a time per key (a sandbox id): pause, resume and destroy
 * of one sandbox never interleave, so each race (resume vs destroy, two
 * resumes, pause vs a starting exec) has exactly one outcome. Different keys
 * run in parallel. In-process only: one compute service owns its sandboxes.
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  /** Runs fn after every earlier holder of key has finished (whether it failed or not). */
  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    const result = before.then(fn);
    const tail = result.then(
      () => {},
      () => {},
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /**
   * Takes key's lock by hand: resolves, once every earlier holder has
   * finished, with the function that lets the next one in (call it once).
   * For an operation whose caller may go on before all of its work is done
   * (a resume's record write), while the next pause still waits for it.
   */
  acquire(key: string): Promise<() => void> {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    let granted!: () => void;
    const entered = new Promise<void>((r) => {
      granted = r;
    });
    void this.run(key, () => {
      granted();
      return held;
    });
    return entered.then(() => release);
  }

  /** Resolves once every operation on key started so far has finished. */
  async idle(key: string): Promise<void> {
    for (let tail = this.tails.get(key); tail; tail = this.tails.get(key)) await tail;
  }

  /** Whether an operation on key is running or queued. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }
}
