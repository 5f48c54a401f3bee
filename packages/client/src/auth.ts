import { Code } from "@platform/errors";
import type { TokenPair } from "@platform/gen/identity/v1/rest_pb";
import type { Authorizer } from "./rest/rest-transport.ts";
import { toPlatformError } from "./errors.ts";

/** A signed-in user's credentials: what to keep (e.g. in a file or storage) to stay signed in. */
export interface Tokens {
  accessToken: string;
  /** Single use: every refresh returns a new one (rotation), the old one is then spent. */
  refreshToken: string;
  /** When the access token expires, in ms since the epoch (its `exp` claim, else now + expires_in). */
  expiresAt: number;
}

/** Refresh this long before the access token expires, so no call is sent with a token about to lapse. */
const REFRESH_MARGIN_MS = 30_000;

/** The access token's `exp` (ms), read without verifying: only to know when to refresh. */
export function jwtExpiry(token: string): number | undefined {
  const payload = token.split(".")[1];
  if (!payload) return undefined;
  try {
    const b64 = payload
      .replace(/-/g, "+")
      .replace(/_/g, "/")
      .padEnd(Math.ceil(payload.length / 4) * 4, "=");
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes)) as { exp?: unknown };
    return typeof claims.exp === "number" ? claims.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/** Tokens from identity's token pair. */
export function tokensOf(pair: TokenPair, now = Date.now()): Tokens {
  return {
    accessToken: pair.accessToken,
    refreshToken: pair.refreshToken,
    expiresAt: jwtExpiry(pair.accessToken) ?? now + Number(pair.expiresIn || 3600n) * 1000,
  };
}

/**
 * The client's credential: an API key, or a user's token pair that it keeps
 * fresh. The access token is refreshed before it expires and once on a 401
 * (the token was revoked, or the clock is off); concurrent calls share one
 * refresh, since each refresh token is good for one use only (a second use is
 * `refresh_token_reused` and revokes the whole family). A refresh refused
 * (`refresh_token_invalid`, `refresh_token_reused`: sign in again) signs out.
 */
export class CredentialState implements Authorizer {
  #apiKey: string | undefined;
  #tokens: Tokens | undefined;
  #refreshing: Promise<void> | undefined;

  constructor(
    private readonly refresher: (refreshToken: string) => Promise<TokenPair>,
    private readonly onTokens?: (tokens: Tokens | undefined) => void,
  ) {}

  get tokens(): Tokens | undefined {
    return this.#tokens;
  }

  get apiKey(): string | undefined {
    return this.#apiKey;
  }

  setApiKey(key: string | undefined): void {
    this.#apiKey = key;
  }

  setTokens(tokens: Tokens | undefined, notify = true): void {
    this.#tokens = tokens;
    if (notify) this.onTokens?.(tokens);
  }

  async authorization(): Promise<string | undefined> {
    if (this.#apiKey) return `Bearer ${this.#apiKey}`;
    if (!this.#tokens) return undefined;
    if (this.#tokens.expiresAt - REFRESH_MARGIN_MS <= Date.now()) await this.refresh();
    return this.#tokens ? `Bearer ${this.#tokens.accessToken}` : undefined;
  }

  async renew(used: string): Promise<boolean> {
    if (this.#apiKey || !this.#tokens) return false;
    // Another call refreshed while this one was out: send it again with the new token.
    if (`Bearer ${this.#tokens.accessToken}` !== used) return true;
    await this.refresh();
    return this.#tokens !== undefined;
  }

  /** Exchanges the refresh token for a new pair now (one exchange at a time). */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#refresh().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #refresh(): Promise<void> {
    const current = this.#tokens;
    if (!current) return;
    try {
      this.setTokens(tokensOf(await this.refresher(current.refreshToken)));
    } catch (err) {
      const e = toPlatformError(err);
      // The refresh token is spent, expired or revoked: nothing left to sign in with.
      if (e.code === Code.Unauthenticated || e.code === Code.InvalidArgument) this.setTokens(undefined);
      throw e;
    }
  }
}
