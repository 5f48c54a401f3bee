import { IdentityRestCode, PlatformError, Code } from "@platform/errors";
import { sql, type Kysely } from "kysely";
import { type Clock, systemClock } from "../auth/auth-context.ts";
import type { IdentityDB } from "../db/schema.ts";
import { keyDigest, openResponse, sealResponse } from "./sealed-response.ts";

/** Deduplication window of design.md. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000;
const MAX_KEY_CHARS = 255;

export type Claim = { kind: "claimed" } | { kind: "replay"; response: Uint8Array };

/**
 * Idempotency-Key records (IETF httpapi draft semantics, design.md). A key is
 * claimed with one INSERT ... ON CONFLICT DO NOTHING, so of any number of
 * concurrent identical requests exactly one runs the handler. An expired
 * record, or a running claim whose holder died past its lock, is taken over
 * by the same atomic statement. Keys are stored as their SHA-256 and
 * responses sealed under the KEK (sealed-response.ts): a replay returns the
 * original response, a database dump reveals none of it.
 */
export class IdempotencyStore {
  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly options: { lockMs: number; kek: Buffer; clock?: Clock },
  ) {}

  get #now(): Date {
    return (this.options.clock ?? systemClock)();
  }

  static validateKey(key: string | null): string {
    if (key === null || key.trim() === "") {
      throw PlatformError.invalidArgument(
        "Idempotency-Key header is required",
        IdentityRestCode.idempotencyKeyRequired,
      );
    }
    if (key.length > MAX_KEY_CHARS || !/^[\x21-\x7e]+$/.test(key)) {
      throw PlatformError.invalidArgument(
        `Idempotency-Key must be 1-${MAX_KEY_CHARS} visible ASCII characters`,
        IdentityRestCode.invalidRequest,
      );
    }
    return key;
  }

  async claim(scope: string, key: string, method: string, requestHash: string): Promise<Claim> {
    const now = this.#now;
    const digest = keyDigest(key);
    // A new key, or one whose row has expired or whose holder's lock lapsed, starts over as this request's.
    const running = {
      method,
      request_hash: requestHash,
      state: "running" as const,
      response: null,
      locked_until: new Date(now.getTime() + this.options.lockMs),
      expires_at: new Date(now.getTime() + IDEMPOTENCY_WINDOW_MS),
      created_at: now,
    };
    const claimed = await this.db
      .insertInto("idempotency_keys")
      .values({ scope, key: digest, ...running })
      .onConflict((oc) =>
        oc
          .columns(["scope", "key"])
          .doUpdateSet(running)
          .where((eb) =>
            eb.or([
              eb("idempotency_keys.expires_at", "<=", now),
              eb.and([eb("idempotency_keys.state", "=", "running"), eb("idempotency_keys.locked_until", "<=", now)]),
            ]),
          ),
      )
      .returning(sql<number>`1`.as("won"))
      .executeTakeFirst();
    if (claimed) return { kind: "claimed" };

    const row = await this.db
      .selectFrom("idempotency_keys")
      .select(["method", "request_hash", "state", "response"])
      .where("scope", "=", scope)
      .where("key", "=", digest)
      .executeTakeFirst();
    // Gone between the two statements (the holder failed and released it): try once more.
    if (!row) return this.claim(scope, key, method, requestHash);
    if (row.method !== method || row.request_hash !== requestHash) {
      throw new PlatformError(
        Code.InvalidArgument,
        IdentityRestCode.idempotencyKeyMismatch,
        "Idempotency-Key was already used with a different request",
        {},
        { httpStatus: 422 },
      );
    }
    if (row.state === "running" || !row.response) {
      throw PlatformError.alreadyExists(
        "a request with this Idempotency-Key is still being processed",
        IdentityRestCode.idempotencyKeyInUse,
      );
    }
    let response: Uint8Array;
    try {
      response = openResponse(this.options.kek, scope, key, method, row.response);
    } catch (err) {
      // Sealed under another KEK or tampered with: replaying nothing is
      // right, running the request again (a second API key) is not.
      throw PlatformError.internal("stored idempotent response cannot be opened", err);
    }
    return { kind: "replay", response };
  }

  async complete(scope: string, key: string, method: string, response: Uint8Array): Promise<void> {
    await this.db
      .updateTable("idempotency_keys")
      .set({ state: "done", response: sealResponse(this.options.kek, scope, key, method, response) })
      .where("scope", "=", scope)
      .where("key", "=", keyDigest(key))
      .execute();
  }

  /** The handler failed: forget the claim so the client may retry with the same key. */
  async release(scope: string, key: string): Promise<void> {
    await this.db
      .deleteFrom("idempotency_keys")
      .where("scope", "=", scope)
      .where("key", "=", keyDigest(key))
      .where("state", "=", "running")
      .execute();
  }

  /** Drops records past the window. */
  async purgeExpired(): Promise<number> {
    const res = await this.db.deleteFrom("idempotency_keys").where("expires_at", "<=", this.#now).executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
