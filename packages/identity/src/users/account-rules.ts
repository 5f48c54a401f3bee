import { IdentityRestCode, PlatformError } from "@platform/errors";

/** Longer passwords are refused rather than hashed: they would be a cheap way to burn hashing time. */
export const MAX_PASSWORD_CHARS = 1024;
export const MIN_PASSWORD_CHARS = 8;
const MAX_NAME = 200;

const badRequest = (message: string) => PlatformError.invalidArgument(message, IdentityRestCode.invalidRequest);

/** A password being set (sign-up, invitation, change): the bootstrap's rule, at least 8 characters. */
export function checkNewPassword(password: string, field = "password"): void {
  if (password.length < MIN_PASSWORD_CHARS)
    throw badRequest(`${field} must be at least ${MIN_PASSWORD_CHARS} characters`);
  if (password.length > MAX_PASSWORD_CHARS)
    throw badRequest(`${field} must be at most ${MAX_PASSWORD_CHARS} characters`);
}

export function checkUserName(name: string): void {
  if (name.trim() === "") throw badRequest("name must not be empty");
  if (name.length > MAX_NAME) throw badRequest(`name must be at most ${MAX_NAME} characters`);
}
