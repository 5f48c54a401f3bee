import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { ProcessTable } from "./processes.ts";

/**
 * What E2B knows of a sandbox and compute does not: its template name,
 * metadata, end of life (E2B's timeout) and the access token of its envd
 * surface. Kept in memory: after a restart of the listener the sandboxes
 * remain compute's (Describe, pause, destroy) but are no longer reachable
 * through the E2B surface (README, "What is not served").
 */
export interface E2bSandbox {
  sandboxId: string;
  orgId: string;
  templateId: string;
  metadata: Record<string, string>;
  startedAt: Date;
  endAt: Date;
  /** The envd access token create and connect hand out (in memory only, never logged). */
  accessToken: string;
  /** Its SHA-256, compared in constant time. */
  accessTokenHash: Buffer;
  /** E2B's envVars: the default environment of the sandbox's commands. */
  envs: Record<string, string>;
  processes: ProcessTable;
  timer?: NodeJS.Timeout;
}

export function newAccessToken(): { token: string; hash: Buffer } {
  const token = `ea_${randomBytes(32).toString("base64url")}`;
  return { token, hash: hashToken(token) };
}

export function hashToken(token: string): Buffer {
  return createHash("sha256").update(token).digest();
}

export function tokenMatches(record: E2bSandbox, presented: string | undefined): boolean {
  if (!presented) return false;
  return timingSafeEqual(record.accessTokenHash, hashToken(presented));
}

/** The E2B sandboxes this listener made, by id. */
export class SandboxRecords {
  readonly #byId = new Map<string, E2bSandbox>();

  add(record: E2bSandbox): void {
    this.#byId.set(record.sandboxId, record);
  }

  get(sandboxId: string): E2bSandbox | undefined {
    return this.#byId.get(sandboxId);
  }

  /** The record when it belongs to orgId; another org's sandbox is as unknown as a missing one. */
  owned(sandboxId: string, orgId: string): E2bSandbox | undefined {
    const r = this.#byId.get(sandboxId);
    return r && r.orgId === orgId ? r : undefined;
  }

  ofOrg(orgId: string): E2bSandbox[] {
    return [...this.#byId.values()].filter((r) => r.orgId === orgId);
  }

  delete(sandboxId: string): void {
    const r = this.#byId.get(sandboxId);
    if (r?.timer) clearTimeout(r.timer);
    this.#byId.delete(sandboxId);
  }

  all(): E2bSandbox[] {
    return [...this.#byId.values()];
  }
}
