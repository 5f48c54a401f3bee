import { PlatformError } from "@platform/errors";
import type { MessageInput } from "./model.ts";

export const LIST_LIMIT_DEFAULT = 20;
export const LIST_LIMIT_MAX = 100;

// The platform's one UUID check (the id lower-cased, or INVALID_ARGUMENT naming the field).
export { requireUuid } from "@platform/errors";

export function requireText(field: string, value: string | undefined, maxLength = 256): string {
  if (!value || value.trim() === "") throw PlatformError.invalidArgument(`${field} is required`);
  if (value.length > maxLength) throw PlatformError.invalidArgument(`${field} is longer than ${maxLength} characters`);
  return value;
}

/** `limit` of a list call: absent → 20; outside 1..100 → invalid_argument. */
export function listLimit(limit: number | undefined): number {
  if (limit === undefined) return LIST_LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > LIST_LIMIT_MAX) {
    throw PlatformError.invalidArgument(`limit must be between 1 and ${LIST_LIMIT_MAX}`);
  }
  return limit;
}

const ROLES = new Set(["user", "assistant", "tool"]);
/** Bound on one request's messages, so one call cannot flood the log. */
export const MAX_MESSAGES = 100;
export const MAX_MESSAGE_BYTES = 512 * 1024;

export function validateMessages(messages: readonly MessageInput[]): void {
  if (messages.length === 0) throw PlatformError.invalidArgument("messages is required and must not be empty");
  if (messages.length > MAX_MESSAGES)
    throw PlatformError.invalidArgument(`at most ${MAX_MESSAGES} messages per request`);
  messages.forEach((m, i) => {
    if (!ROLES.has(m.role)) throw PlatformError.invalidArgument(`messages[${i}].role must be user, assistant or tool`);
    if (Buffer.byteLength(m.content) > MAX_MESSAGE_BYTES) {
      throw PlatformError.invalidArgument(`messages[${i}].content is larger than ${MAX_MESSAGE_BYTES} bytes`);
    }
    if (m.role === "tool") {
      if (!m.toolUseId) throw PlatformError.invalidArgument(`messages[${i}].toolUseId is required when role is tool`);
    } else {
      if (m.toolUseId)
        throw PlatformError.invalidArgument(`messages[${i}].toolUseId is only allowed when role is tool`);
      if (m.isError) throw PlatformError.invalidArgument(`messages[${i}].isError is only allowed when role is tool`);
      if (m.content.trim() === "") throw PlatformError.invalidArgument(`messages[${i}].content is required`);
    }
  });
}
