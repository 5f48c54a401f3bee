import { PlatformError } from "@platform/errors";

// The list cursor is the keyset position of the last row of a page (the
// row's insertion counter), wrapped so clients treat it as opaque. New rows
// get higher positions and sort first (newest first), so inserts while a
// client pages never shift, repeat or skip the rows after its cursor.

const PREFIX = "a1:";

export function encodeCursor(position: number): string {
  return Buffer.from(PREFIX + position.toString(36)).toString("base64url");
}

export function decodeCursor(cursor: string): number {
  const text = Buffer.from(cursor, "base64url").toString();
  const digits = text.startsWith(PREFIX) ? text.slice(PREFIX.length) : "";
  const position = /^[0-9a-z]{1,12}$/.test(digits) ? Number.parseInt(digits, 36) : Number.NaN;
  if (!Number.isSafeInteger(position) || position < 0)
    throw PlatformError.invalidArgument("after is not a valid cursor");
  return position;
}
