import { randomBytes } from "node:crypto";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import argon2 from "argon2";
import { ARGON2_DEFAULTS, type Argon2Settings } from "../config/settings.ts";
import { QueueFullError, Semaphore } from "./semaphore.ts";

/** Seconds a refused caller is told to wait: one hash takes ~0.1 s, the queue drains in about a second. */
const BUSY_RETRY_AFTER_SECONDS = 1;

/**
 * The longest a login is let wait for a hashing slot, by the recent time of
 * a hash. A fixed queue length is the wrong bound on a loaded machine: 32
 * hashes of 0.1 s are a 1.6 s wait on a quiet machine and 30 s (past the
 * request deadline) on one where a hash takes a second. A login that would
 * wait longer is refused at once and can come back (Retry-After).
 */
export const MAX_HASH_WAIT_MS = 2000;

const busy = () =>
  PlatformError.unavailable("too many password checks in progress; retry shortly", IdentityRestCode.unavailable, {
    retry_after: String(BUSY_RETRY_AFTER_SECONDS),
  });

/**
 * argon2id hashing behind a semaphore. `verifyDummy` spends the same work on
 * an unknown email as `verify` does on a known one, so response time does not
 * tell whether an account exists.
 */
export class PasswordHasher {
  readonly semaphore: Semaphore;
  /** Logins admitted now (see `admit`). */
  #admitted = 0;
  /** Moving average of a hash's time in its slot, ms (starts at a quiet machine's). */
  #hashMs = 100;
  #dummy: Promise<string> | undefined;

  constructor(readonly params: Argon2Settings) {
    this.semaphore = new Semaphore(params.maxConcurrent, params.maxQueue ?? ARGON2_DEFAULTS.maxQueue);
  }

  /** The recent time of a hash in its slot, ms (for tests and metrics). */
  get hashMs(): number {
    return this.#hashMs;
  }

  /** Logins between admission and verdict now (for tests and metrics). */
  get admitted(): number {
    return this.#admitted;
  }

  /**
   * True when the next login would be refused (`admit`): as many logins as
   * the semaphore has slots and queue places are admitted, or the next one
   * would wait longer than MAX_HASH_WAIT_MS for a slot. Cheap, so the server
   * can ask it before a login request is even parsed (login-shed.ts).
   */
  get full(): boolean {
    const { limit, maxQueue } = this.semaphore;
    if (this.#admitted >= limit + maxQueue) return true;
    // Logins ahead of the next one for a slot, and so its expected wait.
    const ahead = this.#admitted + 1 - limit;
    return ahead > 0 && (ahead * this.#hashMs) / limit > MAX_HASH_WAIT_MS;
  }

  /** The refusal of a login while `full` (503 unavailable + Retry-After); one object, made once. */
  readonly busyError = busy();

  /** The semaphore, with a full queue answered as 503 unavailable + Retry-After. */
  async #run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const timed = async () => {
      const started = performance.now();
      try {
        return await fn();
      } finally {
        this.#hashMs = 0.8 * this.#hashMs + 0.2 * (performance.now() - started);
      }
    };
    try {
      return await this.semaphore.run(timed, signal);
    } catch (err) {
      if (!(err instanceof QueueFullError)) throw err;
      throw busy();
    }
  }

  /**
   * Runs a login's credential check (its database lookup, then its hash)
   * only if it can be served: at most as many logins as the semaphore has
   * slots and queue places are between admission and verdict; the next is
   * refused at once (503 + Retry-After) before it costs a database lookup.
   * Checking the queue alone would admit a whole flood: its logins all find
   * the queue empty while they wait for the database, then all queue. Fewer
   * are admitted while hashes are slow (MAX_HASH_WAIT_MS).
   */
  async admit<T>(fn: () => Promise<T>): Promise<T> {
    if (this.full) throw busy();
    this.#admitted++;
    try {
      return await fn();
    } finally {
      this.#admitted--;
    }
  }

  hash(password: string): Promise<string> {
    return this.#run(() =>
      argon2.hash(password, {
        type: argon2.argon2id,
        memoryCost: this.params.memoryKiB,
        timeCost: this.params.timeCost,
        parallelism: this.params.parallelism,
      }),
    );
  }

  /** With `signal`: given up while still queued once the caller is gone (Semaphore.run). */
  async verify(hash: string, password: string, signal?: AbortSignal): Promise<boolean> {
    return this.#run(async () => {
      try {
        return await argon2.verify(hash, password);
      } catch {
        // A malformed stored hash is a failed login, never a 500 that tells
        // the caller something about the account.
        return false;
      }
    }, signal);
  }

  /** A hash with the current parameters that no password matches (made once, lazily). */
  dummyHash(): Promise<string> {
    this.#dummy ??= this.hash(randomBytes(32).toString("base64"));
    return this.#dummy;
  }

  /** Verifies against the dummy hash: the same work as a real verify, always false. */
  async verifyDummy(password: string, signal?: AbortSignal): Promise<false> {
    await this.verify(await this.dummyHash(), password, signal);
    return false;
  }
}
