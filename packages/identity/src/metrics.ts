import { Gauge, type Registry } from "@platform/rpc";
import type { Identity } from "./identity.ts";

/**
 * identity's own metrics, read from the password hasher at each scrape: the
 * argon2 queue (what a login storm fills first), the hashes running, the
 * logins admitted and the recent hash time the shed decision uses.
 */
export function registerIdentityMetrics(registry: Registry, identity: Identity): void {
  const hasher = identity.hasher;
  const registers = [registry];
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read());
      },
    });
  gauge(
    "platform_identity_password_hash_queue_depth",
    "Password hashes waiting for a slot (argon2id behind a semaphore)",
    () => hasher.semaphore.waiting,
  );
  gauge(
    "platform_identity_password_hash_queue_limit",
    "Most password hashes that may wait (ARGON2_MAX_QUEUE)",
    () => hasher.semaphore.maxQueue,
  );
  gauge(
    "platform_identity_password_hash_slots",
    "Password hashes that may run at once (ARGON2_MAX_CONCURRENT)",
    () => hasher.semaphore.limit,
  );
  gauge(
    "platform_identity_password_hash_peak_concurrent",
    "Most password hashes seen running at once since start",
    () => hasher.semaphore.peak,
  );
  gauge(
    "platform_identity_logins_admitted",
    "Logins between admission and verdict now (the bound login shedding keeps)",
    () => hasher.admitted,
  );
  gauge(
    "platform_identity_password_hash_recent_seconds",
    "Moving average of one password hash's time in its slot",
    () => hasher.hashMs / 1000,
  );
}
