import { randomBytes } from "node:crypto";
import argon2 from "argon2";
import type { Argon2Settings } from "../config/settings.ts";
import { Semaphore } from "./semaphore.ts";

/**
 * argon2id hashing behind a semaphore. `verifyDummy` spends the same work on
 * an unknown email as `verify` does on a known one, so response time does not
 * tell whether an account exists.
 */
export class PasswordHasher {
  readonly semaphore: Semaphore;
  #dummy: Promise<string> | undefined;

  constructor(readonly params: Argon2Settings) {
    this.semaphore = new Semaphore(params.maxConcurrent);
  }

  hash(password: string): Promise<string> {
    return this.semaphore.run(() =>
      argon2.hash(password, {
        type: argon2.argon2id,
        memoryCost: this.params.memoryKiB,
        timeCost: this.params.timeCost,
        parallelism: this.params.parallelism,
      }),
    );
  }

  async verify(hash: string, password: string): Promise<boolean> {
    return this.semaphore.run(async () => {
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
