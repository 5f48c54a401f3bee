// The console's connection to the platform: one PlatformClient (and the
// generated clients the SDK does not wrap) on the page's own origin, where
// the router passes identity's and agents' REST/SSE paths through.
import { createClient } from "@connectrpc/connect";
import { type Authorizer, createRestTransport, jwtExpiry, PlatformClient, type Tokens } from "@platform/client";
import { UsageService } from "@platform/gen/agents/v1/usage_pb";
import { AuditService, MemberService, TeamService } from "@platform/gen/identity/v1/teams_pb";

/**
 * The token pair is kept in sessionStorage (THREAT_MODEL.md, "Web console"):
 * it survives a reload of the tab (a run in progress is rejoined), is not
 * shared with other tabs and is gone when the tab closes. The page's CSP lets
 * no other script run on this origin.
 */
const STORAGE_KEY = "platform.console.tokens";

function keptTokens(): Tokens | undefined {
  try {
    const raw = sessionStorage.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as Tokens) : undefined;
  } catch {
    return undefined;
  }
}

function keep(tokens: Tokens | undefined): void {
  if (tokens) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(tokens));
  else sessionStorage.removeItem(STORAGE_KEY);
}

export type Platform = ReturnType<typeof connect>;

/** The clients for the current login (a new set after a switch of organization). */
export function connect(tokens: Tokens | undefined, onSignedOut: () => void) {
  const origin = location.origin;
  const client = new PlatformClient({
    identity: origin,
    agents: origin,
    tokens,
    onTokens: (t) => {
      keep(t);
      if (!t) onSignedOut();
    },
  });
  // The generated team clients share the SDK's login: its token, refreshed the SDK's way.
  const auth: Authorizer = {
    async authorization() {
      const t = client.tokens;
      if (!t) return undefined;
      if (t.expiresAt - Date.now() < 30_000) await client.refresh();
      return `Bearer ${client.tokens!.accessToken}`;
    },
    async renew(used) {
      const t = client.tokens;
      if (!t) return false;
      if (`Bearer ${t.accessToken}` !== used) return true;
      try {
        await client.refresh();
        return true;
      } catch {
        return false;
      }
    },
  };
  const identity = createRestTransport({ baseUrl: origin, auth });
  return {
    client,
    teams: createClient(TeamService, identity),
    members: createClient(MemberService, identity),
    audit: createClient(AuditService, identity),
    // agents' usage RPCs (the SDK does not wrap them yet), on the same origin and login.
    usage: createClient(UsageService, identity),
    /** The organization the access token acts in (its org_id claim). */
    orgId(): string {
      return claims(client.tokens?.accessToken)?.org_id ?? "";
    },
  };
}

export function restoredTokens(): Tokens | undefined {
  return keptTokens();
}

export function storeTokens(tokens: Tokens | undefined): void {
  keep(tokens);
}

export function claims(token: string | undefined): { org_id?: string; sub?: string } | undefined {
  const payload = token?.split(".")[1];
  if (!payload) return undefined;
  try {
    const b64 = payload.replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(b64.padEnd(Math.ceil(b64.length / 4) * 4, "="))) as { org_id?: string };
  } catch {
    return undefined;
  }
}

/** Tokens from a token pair of identity (a switch of organization). */
export function tokensOf(pair: { accessToken: string; refreshToken: string; expiresIn: bigint }): Tokens {
  return {
    accessToken: pair.accessToken,
    refreshToken: pair.refreshToken,
    expiresAt: jwtExpiry(pair.accessToken) ?? Date.now() + Number(pair.expiresIn || 3600n) * 1000,
  };
}

/** A readable message of any error (PlatformError carries the platform's reason). */
export function messageOf(err: unknown): string {
  const e = err as { message?: string; reason?: string };
  const reason = e?.reason ? ` (${e.reason})` : "";
  return `${e?.message ?? String(err)}${reason}`;
}
