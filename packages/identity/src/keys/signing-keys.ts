import { createPrivateKey, createPublicKey, generateKeyPair, type KeyObject, randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { isUniqueViolation } from "@platform/db";
import { AuthReason, PlatformError } from "@platform/errors";
import type { Kysely } from "kysely";
import { recordAudit } from "../audit/audit-log.ts";
import type { AuthCaches } from "../cache/auth-caches.ts";
import type { CoherentCache } from "../cache/coherent-cache.ts";
import { open, seal } from "@platform/credentials";
import type { IdentityDB } from "../db/schema.ts";

const generate = promisify(generateKeyPair);

type KeyMaterial = { kid: string; publicDer: Buffer; privateEnc: Buffer };

export type ActiveKey = { kid: string; privateKey: KeyObject };
export type KeyState = "pending" | "active" | "retiring" | "retired";
export type PublicKey = { kid: string; state: KeyState; der: Buffer; key: KeyObject };

/** Scheduled rotation's timing (config/settings.ts keyRotation). */
export type RotationPolicy = {
  /** How long a key signs before the next one takes over; undefined: never by schedule. */
  intervalMs: number | undefined;
  /** How long the next key is published (and verifies) before it signs. */
  prePublishMs: number;
  /** How long a key that stopped signing still verifies: the longest token lifetime. */
  retentionMs: number;
};

/** What one rotation step did. */
export type RotationStep = {
  published?: string;
  activated?: string;
  deactivated?: string;
  retired: string[];
  pendingSince?: Date;
};

/** The states in which a key is published and verifies (the spec's "retired" never does). */
export const VERIFYING_STATES: readonly KeyState[] = ["pending", "active", "retiring"];

/**
 * RS256 signing keys. Private keys are stored sealed under the KEK; the
 * database's partial unique index keeps at most one key active, so replicas
 * that start together converge on a single key.
 */
export class SigningKeys {
  #active: ActiveKey | undefined;
  #publicCache = new Map<string, KeyObject>();
  // Every JWT verification looks its kid up; states change only on rotation.
  readonly #found: CoherentCache<string, PublicKey>;
  // Every login signs: the active key is re-read only after a rotation is
  // notified (a replica may sign with a just-retired key for that long).
  readonly #activeKey: CoherentCache<true, ActiveKey>;

  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly kek: Buffer,
    private readonly caches: AuthCaches,
  ) {
    this.#found = caches.create(1000, 60_000);
    this.#activeKey = caches.create(1, 60_000);
    caches.on("s", (kid) => {
      this.#found.invalidate(kid);
      this.#activeKey.clear();
    });
  }

  /** Makes sure one key is active, generating it if there is none. Returns its kid. */
  async ensureActiveKey(): Promise<string> {
    const existing = await this.#loadActive();
    if (existing) return existing.kid;
    const { kid, publicDer, privateEnc } = await this.#newKeyMaterial();
    try {
      await this.db
        .insertInto("signing_keys")
        .values({ kid, state: "active", public_der: publicDer, private_enc: privateEnc, activated_at: new Date() })
        .execute();
    } catch (err) {
      // Another replica activated a key first: use theirs.
      if (!isUniqueViolation(err)) throw err;
    }
    const active = await this.#loadActive();
    if (!active) throw PlatformError.internal("no active signing key after activation");
    return active.kid;
  }

  /**
   * Retires the active key and activates a fresh one in one transaction: the
   * emergency rotation (a key thought compromised), whose tokens stop
   * verifying at once. Scheduled rotation is advanceRotation.
   */
  async rotate(): Promise<string> {
    const { kid, publicDer, privateEnc } = await this.#newKeyMaterial();
    const retired = await this.db.transaction().execute(async (trx) => {
      const rows = await trx
        .updateTable("signing_keys")
        .set({ state: "retired", retired_at: new Date() })
        .where("state", "=", "active")
        .returning("kid")
        .execute();
      await trx
        .insertInto("signing_keys")
        .values({ kid, state: "active", public_der: publicDer, private_enc: privateEnc, activated_at: new Date() })
        .execute();
      // No organization's: the platform's own entry (read with SQL by its operator).
      await recordAudit(
        trx,
        {},
        {
          action: "signing_key.rotated",
          target: { type: "signing_key", id: kid },
          details: { retired: rows.map((r) => r.kid).join(",") },
        },
      );
      return rows;
    });
    this.#active = undefined;
    for (const r of retired) this.caches.changed("s", r.kid);
    return kid;
  }

  /**
   * One step of scheduled rotation, in one transaction holding the active
   * key's row lock so that replicas running it at once take turns (the second
   * finds the work done): retires retiring keys past their retention,
   * activates the pending key once it has been published prePublishMs (the
   * active one becomes retiring), and publishes a new pending key when the
   * active one is due to be replaced within prePublishMs. `force` publishes
   * the next key whatever the interval (identity rotate-keys); it never
   * shortens pre-publication or retention.
   */
  async advanceRotation(policy: RotationPolicy, options: { now?: Date; force?: boolean } = {}): Promise<RotationStep> {
    const now = options.now ?? new Date();
    const step: RotationStep = { retired: [] };
    await this.db.transaction().execute(async (trx) => {
      await this.#stepIn(trx, policy, now, options.force === true, step);
      if (step.activated || step.published || step.retired.length) {
        // No organization's: the platform's own entry, in the step's transaction.
        await recordAudit(
          trx,
          {},
          {
            action: "signing_key.rotation_step",
            target: { type: "signing_key", id: step.activated ?? step.published ?? step.retired[0]! },
            details: {
              published: step.published ?? "",
              activated: step.activated ?? "",
              deactivated: step.deactivated ?? "",
              retired: step.retired.join(","),
            },
          },
        );
      }
    });
    if (step.activated) this.#active = undefined;
    for (const kid of [step.activated, step.deactivated, ...step.retired]) if (kid) this.caches.changed("s", kid);
    return step;
  }

  async #stepIn(
    trx: Kysely<IdentityDB>,
    policy: RotationPolicy,
    now: Date,
    force: boolean,
    step: RotationStep,
  ): Promise<void> {
    const active = await trx
      .selectFrom("signing_keys")
      .select(["kid", "activated_at", "created_at"])
      .where("state", "=", "active")
      .forUpdate()
      .executeTakeFirst();
    if (!active) return;
    const retiring = await trx
      .selectFrom("signing_keys")
      .select(["kid", "deactivated_at"])
      .where("state", "=", "retiring")
      .execute();
    const due = retiring
      .filter((r) => (r.deactivated_at ?? now).getTime() + policy.retentionMs <= now.getTime())
      .map((r) => r.kid);
    if (due.length) {
      await trx
        .updateTable("signing_keys")
        .set({ state: "retired", retired_at: now })
        .where("kid", "in", due)
        .execute();
      step.retired = due;
    }
    const pending = await trx
      .selectFrom("signing_keys")
      .select(["kid", "created_at"])
      .where("state", "=", "pending")
      .executeTakeFirst();
    if (pending) {
      step.pendingSince = pending.created_at;
      if (pending.created_at.getTime() + policy.prePublishMs > now.getTime()) return;
      await trx
        .updateTable("signing_keys")
        .set({ state: "retiring", deactivated_at: now })
        .where("kid", "=", active.kid)
        .execute();
      await trx
        .updateTable("signing_keys")
        .set({ state: "active", activated_at: now })
        .where("kid", "=", pending.kid)
        .execute();
      step.activated = pending.kid;
      step.deactivated = active.kid;
      return;
    }
    const since = (active.activated_at ?? active.created_at).getTime();
    const replaceDue =
      policy.intervalMs !== undefined && since + policy.intervalMs - policy.prePublishMs <= now.getTime();
    if (!force && !replaceDue) return;
    // Generated under the lock (a fraction of a second, once per interval): the other replicas' steps wait for it.
    const { kid, publicDer, privateEnc } = await this.#newKeyMaterial();
    // Published when its row is written, not when the step began: the key's
    // generation can take seconds on a loaded machine, and pre-publication
    // must count only time in which a verifier could have fetched the key.
    const publishedAt = new Date(Math.max(now.getTime(), Date.now()));
    await trx
      .insertInto("signing_keys")
      .values({ kid, state: "pending", public_der: publicDer, private_enc: privateEnc, created_at: publishedAt })
      .execute();
    step.published = kid;
  }

  /** The key to sign with; a rotation by another replica is seen once notified (uncached without the listener). */
  async active(): Promise<ActiveKey> {
    const active = await this.#activeKey.through(true, () => this.#loadActive());
    if (!active) throw PlatformError.internal("no active signing key");
    return active;
  }

  /** A key by kid as cached, without a read: undefined when it is not cached (then `find`). */
  cached(kid: string): PublicKey | undefined {
    return this.#found.get(kid);
  }

  /** A key by kid in any state, or undefined. */
  find(kid: string): Promise<PublicKey | undefined> {
    return this.#found.through(kid, () => this.#read(kid));
  }

  async #read(kid: string): Promise<PublicKey | undefined> {
    const row = await this.db
      .selectFrom("signing_keys")
      .select(["kid", "state", "public_der"])
      .where("kid", "=", kid)
      .executeTakeFirst();
    if (!row) return undefined;
    const der = Buffer.from(row.public_der);
    let key = this.#publicCache.get(kid);
    if (!key) {
      key = createPublicKey({ key: der, format: "der", type: "spki" });
      this.#publicCache.set(kid, key);
    }
    return { kid: row.kid, state: row.state, der, key };
  }

  /** The keys a verifier outside must accept (the JWKS): pending, active and retiring, newest first. */
  async published(): Promise<PublicKey[]> {
    const rows = await this.db
      .selectFrom("signing_keys")
      .select("kid")
      .where("state", "in", [...VERIFYING_STATES])
      .orderBy("created_at", "desc")
      .execute();
    const keys = await Promise.all(rows.map((r) => this.find(r.kid)));
    return keys.filter((k): k is PublicKey => k !== undefined && verifies(k));
  }

  /** GetPublicKey: every key that verifies is served; retired and unknown kids are NOT_FOUND kid_unknown. */
  async publicKeyDer(kid: string): Promise<Buffer> {
    const found = kid ? await this.find(kid) : undefined;
    if (!found || !verifies(found)) throw PlatformError.notFound("signing key not found", AuthReason.kidUnknown);
    return found.der;
  }

  async #loadActive(): Promise<ActiveKey | undefined> {
    const row = await this.db
      .selectFrom("signing_keys")
      .select(["kid", "private_enc"])
      .where("state", "=", "active")
      .executeTakeFirst();
    if (!row) return undefined;
    if (this.#active?.kid === row.kid) return this.#active;
    const pkcs8 = open(this.kek, row.private_enc, row.kid);
    this.#active = { kid: row.kid, privateKey: createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" }) };
    return this.#active;
  }

  async #newKeyMaterial(): Promise<KeyMaterial> {
    const { publicKey, privateKey } = await generate("rsa", { modulusLength: 2048 });
    const kid = randomUUID();
    const publicDer = publicKey.export({ type: "spki", format: "der" });
    const privateEnc = seal(this.kek, privateKey.export({ type: "pkcs8", format: "der" }), kid);
    return { kid, publicDer, privateEnc };
  }
}

/** Whether tokens signed by this key are accepted (the spec: a retired kid is rejected). */
export function verifies(key: PublicKey): boolean {
  return VERIFYING_STATES.includes(key.state);
}
