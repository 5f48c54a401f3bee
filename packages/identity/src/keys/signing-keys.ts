import { createPrivateKey, createPublicKey, generateKeyPair, type KeyObject, randomUUID } from "node:crypto";
import { promisify } from "node:util";
import { isUniqueViolation } from "@platform/db";
import { AuthReason, PlatformError } from "@platform/errors";
import type { Kysely } from "kysely";
import type { AuthCaches } from "../cache/auth-caches.ts";
import type { CoherentCache } from "../cache/coherent-cache.ts";
import { open, seal } from "../crypto/kek.ts";
import type { IdentityDB } from "../db/schema.ts";

const generate = promisify(generateKeyPair);

export type ActiveKey = { kid: string; privateKey: KeyObject };
export type PublicKey = { kid: string; state: "active" | "retired"; der: Buffer; key: KeyObject };

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
      await this.db.insertInto("signing_keys").values({ kid, state: "active", public_der: publicDer, private_enc: privateEnc }).execute();
    } catch (err) {
      // Another replica activated a key first: use theirs.
      if (!isUniqueViolation(err)) throw err;
    }
    const active = await this.#loadActive();
    if (!active) throw PlatformError.internal("no active signing key after activation");
    return active.kid;
  }

  /** Retires the active key and activates a fresh one in one transaction. */
  async rotate(): Promise<string> {
    const { kid, publicDer, privateEnc } = await this.#newKeyMaterial();
    const retired = await this.db.transaction().execute(async (trx) => {
      const rows = await trx.updateTable("signing_keys").set({ state: "retired", retired_at: new Date() }).where("state", "=", "active").returning("kid").execute();
      await trx.insertInto("signing_keys").values({ kid, state: "active", public_der: publicDer, private_enc: privateEnc }).execute();
      return rows;
    });
    this.#active = undefined;
    for (const r of retired) this.caches.changed("s", r.kid);
    return kid;
  }

  /** The key to sign with; a rotation by another replica is seen once notified (uncached without the listener). */
  async active(): Promise<ActiveKey> {
    const active = await this.#activeKey.through(true, () => this.#loadActive());
    if (!active) throw PlatformError.internal("no active signing key");
    return active;
  }

  /** A key by kid in any state, or undefined. */
  find(kid: string): Promise<PublicKey | undefined> {
    return this.#found.through(kid, () => this.#read(kid));
  }

  async #read(kid: string): Promise<PublicKey | undefined> {
    const row = await this.db.selectFrom("signing_keys").select(["kid", "state", "public_der"]).where("kid", "=", kid).executeTakeFirst();
    if (!row) return undefined;
    const der = Buffer.from(row.public_der);
    let key = this.#publicCache.get(kid);
    if (!key) {
      key = createPublicKey({ key: der, format: "der", type: "spki" });
      this.#publicCache.set(kid, key);
    }
    return { kid: row.kid, state: row.state, der, key };
  }

  /** GetPublicKey: only the active key is served; retired and unknown kids are NOT_FOUND kid_unknown. */
  async publicKeyDer(kid: string): Promise<Buffer> {
    const found = kid ? await this.find(kid) : undefined;
    if (found?.state !== "active") throw PlatformError.notFound("signing key not found", AuthReason.kidUnknown);
    return found.der;
  }

  async #loadActive(): Promise<ActiveKey | undefined> {
    const row = await this.db.selectFrom("signing_keys").select(["kid", "private_enc"]).where("state", "=", "active").executeTakeFirst();
    if (!row) return undefined;
    if (this.#active?.kid === row.kid) return this.#active;
    const pkcs8 = open(this.kek, row.private_enc, row.kid);
    this.#active = { kid: row.kid, privateKey: createPrivateKey({ key: pkcs8, format: "der", type: "pkcs8" }) };
    return this.#active;
  }

  async #newKeyMaterial(): Promise<{ kid: string; publicDer: Buffer; privateEnc: Buffer }> {
    const { publicKey, privateKey } = await generate("rsa", { modulusLength: 2048 });
    const kid = randomUUID();
    const publicDer = publicKey.export({ type: "spki", format: "der" });
    const privateEnc = seal(this.kek, privateKey.export({ type: "pkcs8", format: "der" }), kid);
    return { kid, publicDer, privateEnc };
  }
}
