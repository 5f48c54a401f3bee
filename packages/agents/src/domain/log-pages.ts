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
