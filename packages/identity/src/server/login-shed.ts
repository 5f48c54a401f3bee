import type { PlatformError } from "@platform/errors";
import type { RequestHead } from "@platform/rpc";
import type { PasswordHasher } from "../passwords/password-hasher.ts";

/** The REST path of SessionService.Login (proto: POST /v1/auth/login). */
const LOGIN_PATH = "/v1/auth/login";

/**
 * The servers' early refusal (rpc ServerOptions.shed): while the hashing
 * queue is full, a login is answered 503 + Retry-After before its body is
 * read or routed, with the same answer the login itself would give
 * (PasswordHasher.admit). In a storm of logins the event loop's time per
 * request is what the clients wait for in the listen queue (issue 15 item 4:
 * a refusal costing 1 ms in the handler was seen 13-20 s late by the clients,
 * behind everyone else's routing and parsing).
 */
export function loginShed(hasher: PasswordHasher): (req: RequestHead, path: string) => PlatformError | undefined {
  return (req, path) => (req.method === "POST" && path === LOGIN_PATH && hasher.full ? hasher.busyError : undefined);
}
