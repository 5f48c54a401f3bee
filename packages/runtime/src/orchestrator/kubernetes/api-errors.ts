import { OrchestratorError } from "../orchestrator.ts";

/** HTTP status and Status reason of a failed client-node call, when the server answered. */
export function apiStatus(err: unknown): { code: number; reason?: string; message?: string } | undefined {
  const e = err as { code?: unknown; body?: unknown };
  if (typeof e?.code !== "number") return undefined;
  let body: { reason?: string; message?: string } | undefined;
  try {
    body = typeof e.body === "string" ? JSON.parse(e.body) : (e.body as typeof body);
  } catch {
    body = undefined;
  }
  return { code: e.code, reason: body?.reason, message: body?.message };
}

/**
 * Maps an API failure onto the port's error kinds: 404 not_found, 409
 * AlreadyExists already_exists; a conflict, 429, 5xx or no answer at all is
 * transient (the controller retries with backoff). Anything else (400, 403,
 * 422: a bug or missing RBAC) is returned as a plain error, not retried.
 */
export function toOrchestratorError(err: unknown, what: string): Error {
  const s = apiStatus(err);
  if (!s)
    return new OrchestratorError("transient", `${what}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  if (s.code === 404) return new OrchestratorError("not_found", `${what}: ${s.message ?? "not found"}`, { cause: err });
  if (s.code === 409 && s.reason === "AlreadyExists")
    return new OrchestratorError("already_exists", `${what}: ${s.message ?? "already exists"}`, { cause: err });
  if (s.code === 409 || s.code === 429 || s.code >= 500)
    return new OrchestratorError("transient", `${what}: ${s.code} ${s.message ?? ""}`.trim(), { cause: err });
  return new Error(`${what}: Kubernetes API answered ${s.code} ${s.reason ?? ""}: ${s.message ?? ""}`, { cause: err });
}
