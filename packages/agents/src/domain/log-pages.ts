import { PlatformError } from "@platform/errors";
import type { Session, SessionEvent } from "./model.ts";
import type { Store } from "./store.ts";

/** Events read at a time when a whole log is needed. */
export const LOG_PAGE = 1000;

/**
 * A session and its whole log as of the first read, a page at a time: a
 * long log is never one big query and parse (on PGlite the query runs on
 * the service's own thread), so other requests get turns between pages.
 * Undefined when the session is missing (or was deleted meanwhile).
 */
export async function readWholeLog(
  store: Pick<Store, "readLog">,
  orgId: string,
  sessionId: string,
  pageSize = LOG_PAGE,
): Promise<{ session: Session; events: SessionEvent[] } | undefined> {
  const read = await store.readLog(orgId, sessionId, 0, pageSize);
  if (!read) return undefined;
  const end = read.session.lastSeq;
  for (let page = read.events; page.length === pageSize && page.at(-1)!.seq < end; ) {
    const more = await store.readLog(orgId, sessionId, page.at(-1)!.seq, pageSize);
    if (!more) return undefined;
    page = more.events.filter((e) => e.seq <= end);
    read.events.push(...page);
  }
  return read;
}

/** Events of one GetSession page when the request names no size, and the most one may ask for. */
export const SESSION_PAGE = 1000;

// A GetSession page token is the keyset position of the page's last event
// (its seq) and the session it belongs to, wrapped so clients treat it as
// opaque. The log only grows at its end, so a walk never repeats or skips
// an event, whatever is appended meanwhile.
const TOKEN_PREFIX = "l1:";

export function encodePageToken(sessionId: string, afterSeq: number): string {
  return Buffer.from(`${TOKEN_PREFIX}${sessionId.toLowerCase()}:${afterSeq.toString(36)}`).toString("base64url");
}

/** The seq a page token continues after; invalid_argument for anything not a token of this session. */
export function decodePageToken(token: string, sessionId: string): number {
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(token) ? Buffer.from(token, "base64url").toString() : "";
  const m = /^l1:([0-9a-f-]{36}):([0-9a-z]{1,11})$/.exec(text);
  const seq = m && m[1] === sessionId.toLowerCase() ? Number.parseInt(m[2]!, 36) : Number.NaN;
  if (!Number.isSafeInteger(seq) || seq < 1)
    throw PlatformError.invalidArgument("page_token is not a page token of this session");
  return seq;
}

/**
 * One page of a session's log: the session and up to `pageSize` events
 * (0: SESSION_PAGE; more is lowered to it) after the token's position, read
 * with a keyset query (seq > position, by the (session_id, seq) key), so a
 * page deep in a long log costs what the first one does. `next` is set only
 * when the log has events after the page. Undefined when the session is missing.
 */
export async function readLogPage(
  store: Pick<Store, "readLog">,
  orgId: string,
  sessionId: string,
  options: { pageSize?: number; pageToken?: string } = {},
): Promise<{ session: Session; events: SessionEvent[]; next?: string } | undefined> {
  const size = !options.pageSize || options.pageSize > SESSION_PAGE ? SESSION_PAGE : options.pageSize;
  const after = options.pageToken ? decodePageToken(options.pageToken, sessionId) : 0;
  // One more than the page: whether another page follows, from the same read.
  const read = await store.readLog(orgId, sessionId, after, size + 1);
  if (!read) return undefined;
  if (read.events.length <= size) return read;
  read.events.length = size;
  return { ...read, next: encodePageToken(sessionId, read.events.at(-1)!.seq) };
}
