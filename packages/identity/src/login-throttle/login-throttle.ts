import { Code, IdentityRestCode, PlatformError } from "@platform/errors";
import { type Clock, systemClock } from "../auth/auth-context.ts";
import type { LoginThrottleSettings } from "../config/settings.ts";
import { TrustedProxies } from "./client-address.ts";

type Entry = { failures: number; blockedUntil: number; lastFailureAt: number };

/**
 * Failure counts by key, least recently used first (a Map keeps insertion
 * order; a touched entry is moved to the end). At most `maxEntries`: an
 * attacker rotating emails or addresses evicts the oldest entries instead of
 * growing the process.
 */
class FailureTable {
  readonly #entries = new Map<string, Entry>();
  constructor(private readonly maxEntries: number) {}

  get size(): number {
    return this.#entries.size;
  }

  get(key: string): Entry | undefined {
    return this.#entries.get(key);
  }

  touch(key: string, entry: Entry): void {
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    if (this.#entries.size > this.maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }
}

/** One login attempt that passed the throttle; report its outcome with `succeeded`. */
export type LoginAttempt = { account: string; address?: string };

/**
 * Brute-force protection for login, per account (lower(email), whether or
 * not it exists, so unknown emails are throttled exactly like known ones)
 * and per client address. Each attempt counts as a failure when it starts,
 * so concurrent guesses cannot all slip through before the first one fails;
 * a success clears the account and takes its attempt back from the address.
 * Beyond the free failures, each failure blocks the key for
 * base × 2^(n − free − 1), at most the maximum; a blocked key is refused
 * with 429 before any password hashing, so a throttled account or address
 * costs the process nothing and delays no one else. Failures are forgotten
 * after `windowMs` without a new one. State is per process: each replica
 * counts on its own.
 */
export class LoginThrottle {
  readonly #accounts: FailureTable;
  readonly #addresses: FailureTable;
  /** LOGIN_TRUSTED_PROXIES, parsed once. */
  readonly trustedProxies: TrustedProxies;

  constructor(
    readonly settings: LoginThrottleSettings,
    private readonly clock: Clock = systemClock,
  ) {
    this.#accounts = new FailureTable(settings.maxEntries);
    this.#addresses = new FailureTable(settings.maxEntries);
    this.trustedProxies = new TrustedProxies(settings.trustedProxies ?? []);
  }

  /** Entries held, for tests of the memory bound. */
  get size(): { accounts: number; addresses: number } {
    return { accounts: this.#accounts.size, addresses: this.#addresses.size };
  }

  /** Refuses a blocked account or address (429 + retry_after), else counts the attempt. */
  begin(email: string, address: string | undefined): LoginAttempt {
    const now = this.clock().getTime();
    const account = email.toLowerCase();
    const wait = Math.max(
      this.#blockedFor(this.#accounts, account, now),
      address ? this.#blockedFor(this.#addresses, address, now) : 0,
    );
    if (wait > 0) {
      throw new PlatformError(
        Code.ResourceExhausted,
        IdentityRestCode.tooManyAttempts,
        "too many failed logins; retry later",
        {
          retry_after: String(Math.ceil(wait / 1000)),
        },
      );
    }
    this.#fail(this.#accounts, account, this.settings.accountFreeFailures, now);
    if (address) this.#fail(this.#addresses, address, this.settings.addressFreeFailures, now);
    return { account, address };
  }

  succeeded(attempt: LoginAttempt): void {
    this.#accounts.delete(attempt.account);
    if (!attempt.address) return;
    const entry = this.#addresses.get(attempt.address);
    if (entry) entry.failures = Math.max(0, entry.failures - 1);
  }

  /** The attempt ended without a verdict on the password (e.g. the hashing queue was full): it does not count. */
  withdraw(attempt: LoginAttempt): void {
    for (const [table, key] of [
      [this.#accounts, attempt.account],
      [this.#addresses, attempt.address],
    ] as const) {
      const entry = key ? table.get(key) : undefined;
      if (entry) entry.failures = Math.max(0, entry.failures - 1);
    }
  }

  #blockedFor(table: FailureTable, key: string, now: number): number {
    const entry = table.get(key);
    return entry && entry.blockedUntil > now ? entry.blockedUntil - now : 0;
  }

  #fail(table: FailureTable, key: string, free: number, now: number): void {
    const previous = table.get(key);
    const failures = previous && now - previous.lastFailureAt < this.settings.windowMs ? previous.failures + 1 : 1;
    const over = failures - free;
    const delay =
      over > 0 ? Math.min(this.settings.baseDelayMs * 2 ** Math.min(over - 1, 40), this.settings.maxDelayMs) : 0;
    table.touch(key, { failures, lastFailureAt: now, blockedUntil: delay > 0 ? now + delay : 0 });
  }
}
