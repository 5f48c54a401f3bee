import { randomBytes } from "node:crypto";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import argon2 from "argon2";
import { ARGON2_DEFAULTS, type Argon2Settings } from "../config/settings.ts";
import { QueueFullError, Semaphore } from "./semaphore.ts";

/** Seconds a refused caller is told to wait: one hash takes ~0.1 s, the queue drains in about a second. */
const BUSY_RETRY_AFTER_SECONDS = 1;

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
  #dummy: Promise<string> | undefined;

  constructor(readonly params: Argon2Settings) {
    this.semaphore = new Semaphore(params.maxConcurrent, params.maxQueue ?? ARGON2_DEFAULTS.maxQueue);
  }

  /** The semaphore, with a full queue answered as 503 unavailable + Retry-After. */
  async #run<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await this.semaphore.run(fn);
    } catch (err) {
      if (!(err instanceof QueueFullError)) throw err;
      throw busy();
    }
  }

  /**
   * Refuses at once (503) when the queue is already full, so a flood is
   * turned away before it costs a database lookup; `verify` checks again.
   */
  ensureCapacity(): void {
    if (this.semaphore.full) throw busy();
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

  async verify(hash: string, password: string): Promise<boolean> {
    return this.#run(async () => {
      try {
        return await argon2.verify(hash, password);
      } catch {
        // A malformed stored hash is a failed login, never a 500 that tells
        // the caller something about the account.
        return false;
      }
    });
  }

  /** A hash with the current parameters that no password matches (made once, lazily). */
  dummyHash(): Promise<string> {
    this.#dummy ??= this.hash(randomBytes(32).toString("base64"));
    return this.#dummy;
  }

  /** Verifies against the dummy hash: the same work as a real verify, always false. */
  async verifyDummy(password: string): Promise<false> {
    await this.verify(await this.dummyHash(), password);
    return false;
  }
}
