import { randomUUID } from "node:crypto";
import { isUniqueViolation, prepared, type RunPrepared, statementRunner } from "@platform/db";
import { Code, PlatformError } from "@platform/errors";
import type { NetworkPolicy } from "@platform/network-policy";
import { type Kysely, type RawBuilder, type Selectable, sql } from "kysely";
import { decodeCursor, encodeCursor } from "../domain/cursor.ts";
import type {
  Agent,
  ClientTool,
  EventType,
  McpServer,
  MessageInput,
  NewEvent,
  Page,
  PendingCall,
  QueuedSend,
  Session,
  SessionEvent,
  ToolDecision,
  ToolPermissions,
  Waiting,
} from "../domain/model.ts";
import type {
  AcquireResult,
  AgentChanges,
  DeadRun,
  DeadRunsBy,
  DeleteSessionResult,
  NewAgent,
  RecordDecisionsResult,
  Store,
} from "../domain/store.ts";
import type { Budgets } from "../domain/usage.ts";
import type { AgentsDB, AgentsTable, SessionEventsTable, SessionsTable } from "./schema.ts";
import { NotifyPacer } from "./notify-pacer.ts";
import { budgetsOf } from "./usage-store.ts";

/** Channel of the per-append notifications; payload `<origin>:<sessionId>`. */
export const EVENTS_CHANNEL = "agents_session_events";

/** The Store on PostgreSQL or PGlite through kysely. */
export class KyselyStore implements Store {
  /**
   * @param origin names this process in the change notifications it sends,
   * so its own listener can skip what the in-process hub already delivered.
   */
  constructor(
    private readonly db: Kysely<AgentsDB>,
    private readonly origin = "",
    /** The database's statement runner without kysely (Database.run: PostgreSQL), for the per-token store. */
    run?: RunPrepared,
  ) {
    this.#run = statementRunner({ db, run });
  }

  /** Runs the statements written out with `$n` parameters (statementRunner: kysely only on PGlite). */
  readonly #run: RunPrepared;

  /** The per-token stores' notifications, paced per session (NotifyPacer). */
  readonly #notifications = new NotifyPacer((sessionId) =>
    this.#run(NOTIFY, [EVENTS_CHANNEL, `${this.origin}:${sessionId}`]),
  );

  /** Stops pacing notifications (the service stops; see NotifyPacer.stop). */
  stopNotifying(): void {
    this.#notifications.stop();
  }

  async createAgent(agent: NewAgent): Promise<Agent> {
    try {
      const row = await this.db
        .insertInto("agents")
        .values({
          id: randomUUID(),
          org_id: agent.orgId,
          name: agent.name,
          slug: agent.slug,
          model: agent.model,
          system_prompt: agent.systemPrompt,
          tool_permissions: JSON.stringify(agent.toolPermissions ?? {}),
          mcp_servers: JSON.stringify(agent.mcpServers ?? []),
          client_tools: clientToolsJson(agent.clientTools ?? []),
          budgets: JSON.stringify(agent.budgets ?? {}),
          network_policy: agent.networkPolicy ? JSON.stringify(agent.networkPolicy) : null,
          image: agent.image ?? "",
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return toAgent(row);
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw PlatformError.alreadyExists(`an agent with slug "${agent.slug}" already exists in this organization`);
      }
      throw err;
    }
  }

  async getAgent(orgId: string, id: string): Promise<Agent | undefined> {
    const row = await this.db
      .selectFrom("agents")
      .selectAll()
      .where("org_id", "=", orgId)
      .where("id", "=", id)
      .where("deleted_at", "is", null)
      .executeTakeFirst();
    return row && toAgent(row);
  }

  async updateAgent(orgId: string, id: string, changes: AgentChanges): Promise<Agent | undefined> {
    const set = {
      ...(changes.name !== undefined ? { name: changes.name } : {}),
      ...(changes.slug !== undefined ? { slug: changes.slug } : {}),
      ...(changes.model !== undefined ? { model: changes.model } : {}),
      ...(changes.systemPrompt !== undefined ? { system_prompt: changes.systemPrompt } : {}),
      // Merged in the statement: concurrent updates of different tools both stay.
      ...(changes.toolPermissions !== undefined
        ? { tool_permissions: sql<string>`tool_permissions || ${JSON.stringify(changes.toolPermissions)}::jsonb` }
        : {}),
      ...(changes.mcpServers !== undefined ? { mcp_servers: JSON.stringify(changes.mcpServers) } : {}),
      ...(changes.clientTools !== undefined ? { client_tools: clientToolsJson(changes.clientTools) } : {}),
      ...(changes.budgets !== undefined ? { budgets: JSON.stringify(changes.budgets) } : {}),
      ...(changes.networkPolicy !== undefined
        ? { network_policy: changes.networkPolicy ? JSON.stringify(changes.networkPolicy) : null }
        : {}),
      ...(changes.image !== undefined ? { image: changes.image } : {}),
    };
    try {
      const row = await this.db
        .updateTable("agents")
        .set({ ...set, updated_at: sql`now()` })
        .where("org_id", "=", orgId)
        .where("id", "=", id)
        .where("deleted_at", "is", null)
        .returningAll()
        .executeTakeFirst();
      return row && toAgent(row);
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw PlatformError.alreadyExists(`an agent with slug "${changes.slug}" already exists in this organization`);
      }
      throw err;
    }
  }

  async deleteAgent(orgId: string, id: string): Promise<boolean> {
    const row = await this.db
      .updateTable("agents")
      .set({ deleted_at: sql`now()`, updated_at: sql`now()` })
      .where("org_id", "=", orgId)
      .where("id", "=", id)
      .where("deleted_at", "is", null)
      .returning("id")
      .executeTakeFirst();
    return row !== undefined;
  }

  async listAgents(orgId: string, limit: number, after?: string): Promise<Page<Agent>> {
    let query = this.db.selectFrom("agents").selectAll().where("org_id", "=", orgId).where("deleted_at", "is", null);
    if (after !== undefined) query = query.where("pos", "<", decodeCursor(after));
    const rows = await query
      .orderBy("pos", "desc")
      .limit(limit + 1)
      .execute();
    return pageOf(rows, limit, toAgent);
  }

  async createSession(orgId: string, agentId: string, budgets?: Budgets): Promise<Session> {
    const row = await this.db
      .insertInto("sessions")
      .values({
        id: randomUUID(),
        org_id: orgId,
        agent_id: agentId,
        sandbox_id: null,
        active_run_id: null,
        run_lease_until: null,
        budgets: JSON.stringify(budgets ?? {}),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toSession(row, new Date());
  }

  async listSessions(
    orgId: string,
    limit: number,
    options: { after?: string; agentId?: string } = {},
  ): Promise<Page<Session>> {
    let query = this.db
      .selectFrom("sessions")
      .selectAll()
      .select(sql<Date>`now()`.as("now"))
      .where("org_id", "=", orgId);
    if (options.agentId !== undefined) query = query.where("agent_id", "=", options.agentId);
    if (options.after !== undefined) query = query.where("pos", "<", decodeCursor(options.after));
    const rows = await query
      .orderBy("pos", "desc")
      .limit(limit + 1)
      .execute();
    return pageOf(rows, limit, (r) => toSession(r, r.now));
  }

  async deleteSession(orgId: string, id: string): Promise<DeleteSessionResult> {
    // Only a session no live run holds: acquireRun updates the same row, so
    // a run starting concurrently either takes it first (busy) or finds it gone.
    const row = await this.db
      .deleteFrom("sessions")
      .where("org_id", "=", orgId)
      .where("id", "=", id)
      .where((eb) => eb.or([eb("active_run_id", "is", null), eb("run_lease_until", "<", sql<Date>`now()`)]))
      .returning("sandbox_id")
      .executeTakeFirst();
    if (row) return { deleted: true, sandboxId: row.sandbox_id ?? undefined };
    const exists = await this.db
      .selectFrom("sessions")
      .select("id")
      .where("org_id", "=", orgId)
      .where("id", "=", id)
      .executeTakeFirst();
    return exists ? { deleted: false, busy: true } : { deleted: false, busy: false };
  }

  async getSession(orgId: string, id: string): Promise<Session | undefined> {
    const row = await this.db
      .selectFrom("sessions")
      .selectAll()
      .select(sql<Date>`now()`.as("now"))
      .where("org_id", "=", orgId)
      .where("id", "=", id)
      .executeTakeFirst();
    return row && toSession(row, row.now);
  }

  async listEvents(orgId: string, sessionId: string, after = 0): Promise<SessionEvent[]> {
    const rows = await this.db
      .selectFrom("session_events as e")
      .innerJoin("sessions as s", "s.id", "e.session_id")
      .selectAll("e")
      .where("s.org_id", "=", orgId)
      .where("e.session_id", "=", sessionId)
      .where("e.seq", ">", after)
      .orderBy("e.seq")
      .execute();
    return rows.map(toEvent);
  }

  async readLog(
    orgId: string,
    sessionId: string,
    after: number,
    limit?: number,
  ): Promise<{ session: Session; events: SessionEvent[] } | undefined> {
    // One row per event (or one with null event columns), the session only
    // on the first (one JSON array): repeated on every row, its columns were
    // more than half of each row's parse (~15 % of agents' CPU went to pg row
    // parsing under the mixed-load bench figure). The events are a keyset
    // read inside a lateral subquery (seq > after by the (session_id, seq)
    // primary key, limit inside): an order-by-limit over a plain join made
    // the planner read every event of the session after `after` and sort
    // them, so a page of a 100,000-event log cost a scan of it.
    //
    // Each row is kept small for the driver, whose row objects and strings
    // are most of what a long replay leaves for a full GC (REPLAY_PAGE in
    // runs/follow.ts): created_at as epoch milliseconds (a number, not a
    // 29-character string and a Date the event copied anyway), run_id only
    // where it differs from the row before ('' for the same: one string for a
    // run's events instead of one per row), the session in one column
    // instead of eleven mostly null ones. A named prepared statement on
    // PostgreSQL (its columns are named): parsed and planned once a connection.
    const { rows } = await prepared(
      sql<LogRow>`
      select e.seq, e.run_id, e.type, e.content, e.tokens_in, e.tokens_out, e.tool_use_id, e.is_error, e.created_ms,
        e.queued_seq,
        case when e.nth is null or e.nth = 1 then json_build_array(s.id, s.org_id, s.agent_id, s.last_seq,
          s.sandbox_id, s.active_run_id, ${epochMs(sql.ref("s.run_lease_until"))}, s.budgets,
          ${epochMs(sql.ref("s.updated_at"))}, ${epochMs(sql.ref("s.created_at"))}, ${epochMs(sql`now()`)}) end as session
      from sessions s left join lateral (
        select seq,
          case when run_id is not distinct from lag(run_id) over w then '' else run_id::text end as run_id,
          type, content, tokens_in, tokens_out, tool_use_id, is_error,
          ${epochMs(sql.ref("created_at"))} as created_ms, queued_seq, row_number() over w as nth
        from session_events where session_id = s.id and seq > ${after}
        window w as (order by seq rows between unbounded preceding and current row)
        order by seq ${limit === undefined ? sql`` : sql`limit ${limit}`}
      ) e on true
      where s.org_id = ${orgId} and s.id = ${sessionId}
      order by e.seq`,
    ).execute(this.db);
    const first = rows[0];
    if (!first?.session) return undefined;
    const [id, org_id, agent_id, last_seq, sandbox_id, active_run_id, leaseMs, budgets, updatedMs, createdMs, nowMs] = (
      typeof first.session === "string" ? JSON.parse(first.session) : first.session
    ) as SessionJson;
    const session = toSession(
      {
        id,
        org_id,
        agent_id,
        last_seq,
        sandbox_id,
        active_run_id,
        run_lease_until: leaseMs === null ? null : new Date(leaseMs),
        budgets,
        updated_at: new Date(updatedMs),
        created_at: new Date(createdMs),
      },
      new Date(nowMs),
    );
    if (first.seq === null) return { session, events: [] };
    const events = new Array<SessionEvent>(rows.length);
    let runId: string | null = null;
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i]!;
      if (row.run_id !== "") runId = row.run_id;
      events[i] = eventOf(row, new Date(Number(row.created_ms)), runId);
    }
    return { session, events };
  }

  async acquireRun(
    orgId: string,
    sessionId: string,
    runId: string,
    leaseMs: number,
    owner?: string,
  ): Promise<AcquireResult> {
    const taken = await this.db
      .updateTable("sessions")
      .set({
        active_run_id: runId,
        run_lease_until: sql`now() + make_interval(secs => ${leaseMs / 1000})`,
        run_owner: owner ?? null,
        cancel_requested: false,
        cancel_reason: null,
        updated_at: sql`now()`,
      })
      .where("org_id", "=", orgId)
      .where("id", "=", sessionId)
      .where("active_run_id", "is", null)
      .returningAll()
      .executeTakeFirst();
    if (taken) return { ok: true, session: toSession(taken, new Date(0)) };
    const holder = await this.db
      .selectFrom("sessions")
      .select(["active_run_id", sql<boolean>`run_lease_until < now()`.as("lapsed")])
      .where("org_id", "=", orgId)
      .where("id", "=", sessionId)
      .executeTakeFirst();
    if (!holder) return { ok: false, missing: true };
    // Released between the two statements: try once more.
    if (!holder.active_run_id) return this.acquireRun(orgId, sessionId, runId, leaseMs, owner);
    return { ok: false, activeRunId: holder.active_run_id, lapsed: holder.lapsed === true };
  }

  async renewRun(
    sessionId: string,
    runId: string,
    leaseMs: number,
  ): Promise<{ held: boolean; cancelRequested: boolean; cancelReason?: string }> {
    const row = await this.db
      .updateTable("sessions")
      .set({ run_lease_until: sql`now() + make_interval(secs => ${leaseMs / 1000})` })
      .where("id", "=", sessionId)
      .where("active_run_id", "=", runId)
      .returning(["cancel_requested", "cancel_reason"])
      .executeTakeFirst();
    return {
      held: row !== undefined,
      cancelRequested: row?.cancel_requested ?? false,
      ...(row?.cancel_reason ? { cancelReason: row.cancel_reason } : {}),
    };
  }

  async releaseRun(sessionId: string, runId: string): Promise<void> {
    await this.db
      .updateTable("sessions")
      .set({
        active_run_id: null,
        run_lease_until: null,
        cancel_requested: false,
        cancel_reason: null,
        updated_at: sql`now()`,
      })
      .where("id", "=", sessionId)
      .where("active_run_id", "=", runId)
      .execute();
  }

  async requestCancel(
    orgId: string,
    sessionId: string,
    reason?: "interrupt",
    runId?: string,
  ): Promise<string | undefined> {
    const row = await this.db
      .updateTable("sessions")
      .set({ cancel_requested: true, cancel_reason: reason ?? null })
      .where("org_id", "=", orgId)
      .where("id", "=", sessionId)
      .where("active_run_id", runId === undefined ? "is not" : "=", runId ?? null)
      .where("run_lease_until", ">=", sql<Date>`now()`)
      .returning("active_run_id")
      .executeTakeFirst();
    return row?.active_run_id ?? undefined;
  }

  async deadRuns(by: DeadRunsBy, limit: number, sessionId?: string): Promise<DeadRun[]> {
    let query = this.db
      .selectFrom("sessions")
      .select(["org_id", "id", "active_run_id", "last_seq"])
      .where("active_run_id", "is not", null)
      .where(deadSql(by));
    if (sessionId !== undefined) query = query.where("id", "=", sessionId);
    const rows = await query.orderBy("run_lease_until").limit(limit).execute();
    return rows.map((r) => ({
      orgId: r.org_id,
      sessionId: r.id,
      runId: r.active_run_id!,
      lastSeq: Number(r.last_seq),
    }));
  }

  async openToolUses(sessionId: string, runId: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom("session_events as u")
      .select("u.tool_use_id")
      .where("u.session_id", "=", sessionId)
      .where("u.run_id", "=", runId)
      .where("u.type", "=", "tool_use")
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom("session_events as r")
              .select("r.seq")
              .whereRef("r.session_id", "=", "u.session_id")
              .whereRef("r.tool_use_id", "=", "u.tool_use_id")
              .where("r.type", "in", ["tool_result", "tool"]),
          ),
        ),
      )
      .orderBy("u.seq")
      .execute();
    return rows.map((r) => r.tool_use_id);
  }

  async appendEvents(
    sessionId: string,
    runId: string | undefined,
    events: readonly NewEvent[],
    options: { release?: boolean } = {},
  ): Promise<SessionEvent[]> {
    if (events.length === 0) return [];
    const n = events.length;
    // One statement, so one round trip and atomic: the update's row lock
    // serializes appenders of a session until commit, so seqs are gapless
    // and never shared. The notification (delivered at commit) wakes
    // followers on other replicas.
    const result = await sql<Selectable<SessionEventsTable>>`
      with s as (
        update sessions set last_seq = last_seq + ${n}, updated_at = now(), ${releaseColumns(options.release === true, runId)}
        where id = ${sessionId}
        returning last_seq
      ), ins as (
        insert into session_events (session_id, seq, run_id, type, content, tokens_in, tokens_out, tool_use_id, is_error)
      select ${sessionId}, s.last_seq - ${n} + e.ord, ${runId ?? null}::uuid, e.type, e.content, e.tokens_in, e.tokens_out, e.tool_use_id, e.is_error
      from s, unnest(${eventArrays(events)}) with ordinality as e(type, content, tokens_in, tokens_out, tool_use_id, is_error, ord)
      returning *
      ), n as (
        select pg_notify(${EVENTS_CHANNEL}, ${`${this.origin}:${sessionId}`})
      )
      select ins.* from ins, n`.execute(this.db);
    if (result.rows.length !== n) throw PlatformError.notFound("session not found");
    return result.rows.map(toEvent).sort((a, b) => a.seq - b.seq);
  }

  async storeEvents(
    sessionId: string,
    runId: string,
    events: readonly SessionEvent[],
    options: { release?: boolean; ifDead?: DeadRunsBy } = {},
  ): Promise<void> {
    if (events.length === 0) return;
    const first = events[0]!.seq;
    const last = events.at(-1)!.seq;
    if (last - first + 1 !== events.length) throw PlatformError.internal("events to store must have consecutive seqs");
    // Queued sends this batch takes (their messages name them): off the queue in the same statement.
    const taken = [...new Set(events.flatMap((e) => (e.queuedSeq === undefined ? [] : [e.queuedSeq])))];
    // The conditions are the whole concurrency control: the update's row
    // lock orders writers, and only the holding run whose events follow the
    // log's end matches.
    // Prepared (one parse and plan per connection): it runs once per streamed text token.
    const rows =
      options.release !== true && !options.ifDead && taken.length === 0
        ? await this.#storePlain(sessionId, [
            last,
            sessionId,
            runId,
            first - 1,
            events.map((e) => e.seq),
            events.map((e) => e.type),
            events.map((e) => e.content ?? ""),
            events.map((e) => e.tokensIn ?? 0),
            events.map((e) => e.tokensOut ?? 0),
            events.map((e) => e.toolUseId ?? ""),
            events.map((e) => e.isError ?? false),
            events.map((e) => e.createdAt.toISOString()),
            events.map((e) => e.queuedSeq ?? null),
            EVENTS_CHANNEL,
            `${this.origin}:${sessionId}`,
          ])
        : (await this.#storeEventsStatement(sessionId, runId, events, first, last, taken, options)).rows;
    if (rows[0]?.stored === events.length) return;
    // A retry of a store whose commit went through but whose answer was lost
    // (the connection died): the batch is in the log already, as this run wrote it.
    const tail = events.at(-1)!;
    const already = await this.db
      .selectFrom("session_events")
      .select("seq")
      .where("session_id", "=", sessionId)
      .where("seq", "=", tail.seq)
      .where("run_id", "=", runId)
      .where("type", "=", tail.type)
      .where("content", "=", tail.content)
      .where("created_at", "=", tail.createdAt)
      .executeTakeFirst();
    if (already && !options.ifDead) return;
    if (!options.ifDead) {
      // Still the holder: a queued send (the one writer besides the holder) moved the log's end.
      const holder = await this.db
        .selectFrom("sessions")
        .select("last_seq")
        .where("id", "=", sessionId)
        .where("active_run_id", "=", runId)
        .executeTakeFirst();
      if (holder && Number(holder.last_seq) >= first)
        throw new PlatformError(Code.Aborted, "log_moved", `a queued send moved session ${sessionId}'s log`, {
          lastSeq: String(holder.last_seq),
        });
    }
    throw new PlatformError(
      Code.Aborted,
      "aborted",
      `the run ${runId} lost its hold on session ${sessionId}: its log moved on`,
    );
  }

  /** A plain batch's store: STORE_EVENTS, or STORE_EVENTS_QUIET within the session's notify window (NotifyPacer). */
  async #storePlain(sessionId: string, parameters: unknown[]): Promise<Array<{ stored: number }>> {
    if (this.#notifications.claim(sessionId)) return this.#run<{ stored: number }>(STORE_EVENTS, parameters);
    const rows = await this.#run<{ stored: number }>(
      STORE_EVENTS_QUIET,
      parameters.slice(0, STORE_EVENTS_QUIET_PARAMETERS),
    );
    this.#notifications.stored(sessionId);
    return rows;
  }

  /** storeEvents' statement in its every variant (STORE_EVENTS is the one of a plain batch). */
  #storeEventsStatement(
    sessionId: string,
    runId: string,
    events: readonly SessionEvent[],
    first: number,
    last: number,
    taken: readonly number[],
    options: { release?: boolean; ifDead?: DeadRunsBy },
  ) {
    return prepared(sql<{ stored: number }>`
      with s as (
        update sessions set last_seq = ${last}, updated_at = now(), ${releaseColumns(options.release === true, runId)}
        where id = ${sessionId} and active_run_id = ${runId}::uuid and last_seq = ${first - 1} and ${options.ifDead ? deadSql(options.ifDead) : sql`true`}
        returning id
      ), ins as (
        insert into session_events (session_id, seq, run_id, type, content, tokens_in, tokens_out, tool_use_id, is_error, created_at, queued_seq)
        select s.id, e.seq, ${runId}::uuid, e.type, e.content, e.tokens_in, e.tokens_out, e.tool_use_id, e.is_error, e.created_at, e.queued_seq
        from s, unnest(${events.map((e) => e.seq)}::bigint[], ${eventArrays(events)}, ${events.map((e) => e.createdAt.toISOString())}::timestamptz[],
          ${events.map((e) => e.queuedSeq ?? null)}::bigint[])
          as e(seq, type, content, tokens_in, tokens_out, tool_use_id, is_error, created_at, queued_seq)
        returning 1
      ), ${
        // Only a batch that takes queued sends touches the queue: the delete, even of nothing,
        // cost a text token's store 1.8-2.6 ms more at p50 (PostgreSQL, load ~20).
        taken.length > 0
          ? sql`taken as (
        delete from session_queue q using s
        where q.session_id = s.id and q.seq = any(${taken}::bigint[])
      ), `
          : sql``
      }n as (
        select pg_notify(${EVENTS_CHANNEL}, ${`${this.origin}:${sessionId}`}) from s
      )
      select (select count(*) from ins)::int as stored, (select count(*) from n)::int as notified`).execute(this.db);
  }

  async enqueue(
    orgId: string,
    sessionId: string,
    event: NewEvent,
    options: { interrupt: boolean; whileHeld: boolean },
  ): Promise<{ event: SessionEvent; heldBy?: string } | undefined> {
    // One statement, as appendEvents: the next seq under the session's row
    // lock, the queue row with it. A holding run's next store finds the
    // log's end moved and numbers its events after this one (storeEvents).
    const result = await sql<Selectable<SessionEventsTable> & { held_by: string | null }>`
      with s as (
        update sessions set last_seq = last_seq + 1, updated_at = now()
        where id = ${sessionId} and org_id = ${orgId}
          and (${!options.whileHeld} or (active_run_id is not null and run_lease_until >= now()))
        returning id, last_seq, active_run_id
      ), ins as (
        insert into session_events (session_id, seq, type, content)
        select s.id, s.last_seq, ${event.type}, ${event.content ?? ""} from s
        returning *
      ), q as (
        insert into session_queue (session_id, seq, interrupt)
        select s.id, s.last_seq, ${options.interrupt} from s
      ), n as (
        select pg_notify(${EVENTS_CHANNEL}, ${`${this.origin}:${sessionId}`}) from s
      )
      select ins.*, s.active_run_id as held_by from ins join s on true left join n on true`.execute(this.db);
    const row = result.rows[0];
    return row ? { event: toEvent(row), ...(row.held_by ? { heldBy: row.held_by } : {}) } : undefined;
  }

  async queuedSends(sessionId: string): Promise<QueuedSend[]> {
    const rows = await this.db
      .selectFrom("session_queue as q")
      .innerJoin("session_events as e", (join) =>
        join.onRef("e.session_id", "=", "q.session_id").onRef("e.seq", "=", "q.seq"),
      )
      .select(["q.seq", "q.interrupt", "e.content"])
      .where("q.session_id", "=", sessionId)
      .orderBy("q.interrupt", "desc")
      .orderBy("q.seq")
      .execute();
    return rows.map((r) => ({ seq: Number(r.seq), interrupt: r.interrupt, messages: queuedMessagesOf(r.content) }));
  }

  async idleQueues(limit: number): Promise<Array<{ orgId: string; sessionId: string }>> {
    const rows = await this.db
      .selectFrom("session_queue as q")
      .innerJoin("sessions as s", "s.id", "q.session_id")
      .select(["s.org_id", "s.id"])
      .distinct()
      .where("s.active_run_id", "is", null)
      .limit(limit)
      .execute();
    return rows.map((r) => ({ orgId: r.org_id, sessionId: r.id }));
  }

  async waiting(orgId: string, sessionId: string): Promise<Waiting | undefined> {
    const event = await this.db
      .selectFrom("sessions as s")
      .innerJoin("session_events as e", (join) =>
        join.onRef("e.session_id", "=", "s.id").onRef("e.seq", "=", "s.last_seq"),
      )
      .select(["e.seq", "e.run_id", "e.content"])
      .where("s.org_id", "=", orgId)
      .where("s.id", "=", sessionId)
      .where("e.type", "=", "requires_action")
      .executeTakeFirst();
    if (!event) return undefined;
    const rows = await this.db
      .selectFrom("session_tool_decisions")
      .select(["tool_use_id", "decision", "message", "result_content", "result_is_error"])
      .where("session_id", "=", sessionId)
      .where("request_seq", "=", event.seq)
      .execute();
    const decisions = new Map<string, ToolDecision>();
    for (const r of rows)
      decisions.set(r.tool_use_id, {
        toolUseId: r.tool_use_id,
        decision: r.decision === "allow" || r.decision === "result" ? r.decision : "deny",
        message: r.message,
        ...(r.decision === "result" ? { result: { content: r.result_content, isError: r.result_is_error } } : {}),
      });
    return { seq: Number(event.seq), runId: event.run_id ?? "", calls: pendingCallsOf(event.content), decisions };
  }

  async recordDecisions(
    sessionId: string,
    requestSeq: number,
    decisions: readonly ToolDecision[],
  ): Promise<RecordDecisionsResult> {
    if (decisions.length === 0) return "recorded";
    // One statement: all of the request's answers or none (a duplicate key
    // fails the whole insert), and only while the pause still ends the log.
    try {
      const result = await sql<{ tool_use_id: string }>`
        insert into session_tool_decisions
          (session_id, request_seq, tool_use_id, decision, message, result_content, result_is_error)
        select ${sessionId}::uuid, ${requestSeq}::bigint, d.tool_use_id, d.decision, d.message, d.content, d.is_error
        from unnest(${decisions.map((d) => d.toolUseId)}::text[], ${decisions.map((d) => d.decision)}::text[],
          ${decisions.map((d) => d.message)}::text[], ${decisions.map((d) => d.result?.content ?? "")}::text[],
          ${decisions.map((d) => d.result?.isError ?? false)}::boolean[])
          as d(tool_use_id, decision, message, content, is_error)
        where exists (select 1 from sessions where id = ${sessionId} and last_seq = ${requestSeq} and active_run_id is null)
        returning tool_use_id`.execute(this.db);
      return result.rows.length === decisions.length ? "recorded" : "moved";
    } catch (err) {
      if (isUniqueViolation(err)) return "duplicate";
      throw err;
    }
  }

  async setSandbox(sessionId: string, sandboxId: string): Promise<void> {
    await this.db
      .updateTable("sessions")
      .set({ sandbox_id: sandboxId, updated_at: sql`now()` })
      .where("id", "=", sessionId)
      .execute();
  }

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }
}

/** A page of rows read with `limit + 1`: the extra row only says that another page exists. */
function pageOf<R extends { pos: number | string | bigint }, T>(rows: R[], limit: number, map: (row: R) => T): Page<T> {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items: items.map(map), next: rows.length > limit && last ? encodeCursor(Number(last.pos)) : undefined };
}

/** The condition on a sessions row that its run is dead `by` (see DeadRunsBy). */
function deadSql(by: DeadRunsBy) {
  if ("sole" in by) return sql<boolean>`(run_lease_until < now() or run_owner is distinct from ${by.self})`;
  if ("replica" in by) {
    return sql<boolean>`(run_lease_until < now() or (split_part(run_owner, '#', 1) = ${by.replica} and run_owner <> ${by.self}))`;
  }
  return sql<boolean>`run_lease_until < now()`;
}

/**
 * storeEvents' statement for a plain batch (no release, no takeover
 * condition, no queued send taken): every streamed text token's. The same
 * statement as #storeEventsStatement builds for that variant, less its
 * release columns (each set to itself when not releasing), written out so
 * nothing is built or compiled per token (preparedQuery). Parameters: last
 * seq, session, run, the log's end it follows, the events' columns as
 * arrays (seq, type, content, tokens in, tokens out, tool use id, is error,
 * created at, queued seq), the notification's channel and payload.
 */
const STORE_EVENTS_APPEND = `with s as (
  update sessions set last_seq = $1, updated_at = now()
  where id = $2 and active_run_id = $3::uuid and last_seq = $4
  returning id
), ins as (
  insert into session_events (session_id, seq, run_id, type, content, tokens_in, tokens_out, tool_use_id, is_error, created_at, queued_seq)
  select s.id, e.seq, $3::uuid, e.type, e.content, e.tokens_in, e.tokens_out, e.tool_use_id, e.is_error, e.created_at, e.queued_seq
  from s, unnest($5::bigint[], $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::text[], $11::boolean[], $12::timestamptz[], $13::bigint[])
    as e(seq, type, content, tokens_in, tokens_out, tool_use_id, is_error, created_at, queued_seq)
  returning 1
)`;
const STORE_EVENTS = `${STORE_EVENTS_APPEND}, n as (
  select pg_notify($14, $15) from s
)
select (select count(*) from ins)::int as stored, (select count(*) from n)::int as notified`;
/** STORE_EVENTS without its notification, which the session's notify window sends (NotifyPacer); its first 13 parameters. */
const STORE_EVENTS_QUIET = `${STORE_EVENTS_APPEND}
select (select count(*) from ins)::int as stored`;
const STORE_EVENTS_QUIET_PARAMETERS = 13;
/** The notification a notify window ends with: channel, payload. */
const NOTIFY = "select pg_notify($1, $2)";

/** The SET list that frees the session from `runId` when `release` (and that run still holds it). */
function releaseColumns(release: boolean, runId: string | undefined) {
  const holds = sql`${release} and active_run_id = ${runId ?? null}::uuid`;
  return sql`active_run_id = case when ${holds} then null else active_run_id end,
    run_lease_until = case when ${holds} then null else run_lease_until end,
    cancel_requested = case when ${holds} then false else cancel_requested end`;
}

/** The events' columns as parallel arrays, for `unnest` (type, content, tokens_in, tokens_out, tool_use_id, is_error). */
function eventArrays(events: readonly NewEvent[]) {
  return sql`${events.map((e) => e.type)}::text[],
    ${events.map((e) => e.content ?? "")}::text[],
    ${events.map((e) => e.tokensIn ?? 0)}::bigint[],
    ${events.map((e) => e.tokensOut ?? 0)}::bigint[],
    ${events.map((e) => e.toolUseId ?? "")}::text[],
    ${events.map((e) => e.isError ?? false)}::boolean[]`;
}

function toAgent(row: Selectable<AgentsTable>): Agent {
  return {
    id: row.id,
    orgId: row.org_id,
    name: row.name,
    slug: row.slug,
    model: row.model,
    systemPrompt: row.system_prompt,
    toolPermissions: permissionsOf(row.tool_permissions),
    mcpServers: mcpServersOf(row.mcp_servers),
    clientTools: clientToolsOf(row.client_tools),
    budgets: budgetsOf(row.budgets),
    ...networkPolicyOf(row.network_policy),
    ...(row.image ? { image: row.image } : {}),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

/** The stored network policy, when there is one. */
function networkPolicyOf(value: unknown): { networkPolicy?: NetworkPolicy } {
  const raw = typeof value === "string" ? (JSON.parse(value) as NetworkPolicy | null) : (value as NetworkPolicy | null);
  if (!raw) return {};
  return {
    networkPolicy: {
      allowAll: !!raw.allowAll,
      allowedDomains: raw.allowedDomains ?? [],
      allowedCidrs: raw.allowedCidrs ?? [],
    },
  };
}

/** The stored policies, keeping only the values this version knows. */
function permissionsOf(value: unknown): ToolPermissions {
  const raw = typeof value === "string" ? (JSON.parse(value) as unknown) : value;
  const out: Record<string, "allow" | "ask"> = {};
  if (raw && typeof raw === "object")
    for (const [name, policy] of Object.entries(raw)) if (policy === "allow" || policy === "ask") out[name] = policy;
  return out;
}

/**
 * Client tools as stored: each schema as JSON text inside the jsonb, since
 * jsonb reorders an object's keys and the order of a schema's properties is
 * what the model is shown.
 */
function clientToolsJson(tools: readonly ClientTool[]): string {
  return JSON.stringify(tools.map((t) => ({ ...t, inputSchema: JSON.stringify(t.inputSchema) })));
}

/** The stored client tools (their schemas were checked when set). */
function clientToolsOf(value: unknown): ClientTool[] {
  const raw = typeof value === "string" ? (JSON.parse(value) as unknown) : value;
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((t: { name?: unknown; description?: unknown; inputSchema?: unknown }) =>
    typeof t?.name === "string" && typeof t.inputSchema === "string"
      ? [
          {
            name: t.name,
            description: typeof t.description === "string" ? t.description : "",
            inputSchema: JSON.parse(t.inputSchema) as Record<string, unknown>,
          },
        ]
      : [],
  );
}

/** The stored MCP servers (checked when set). */
function mcpServersOf(value: unknown): McpServer[] {
  const raw = typeof value === "string" ? (JSON.parse(value) as unknown) : value;
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((s: { name?: unknown; url?: unknown; headerNames?: unknown; sealedHeaders?: unknown }) =>
    typeof s?.name === "string" && typeof s.url === "string"
      ? [
          {
            name: s.name,
            url: s.url,
            headerNames: Array.isArray(s.headerNames) ? s.headerNames.filter((h) => typeof h === "string") : [],
            ...(typeof s.sealedHeaders === "string" ? { sealedHeaders: s.sealedHeaders } : {}),
          },
        ]
      : [],
  );
}

/** The pending calls of a `requires_action` event's content (`{"calls": [...]}`). */
function pendingCallsOf(content: string): PendingCall[] {
  try {
    const parsed = JSON.parse(content) as { calls?: unknown };
    if (!Array.isArray(parsed.calls)) return [];
    return parsed.calls.flatMap((c: { toolUseId?: unknown; name?: unknown; input?: unknown; kind?: unknown }) =>
      typeof c?.toolUseId === "string" && typeof c.name === "string"
        ? [
            {
              toolUseId: c.toolUseId,
              name: c.name,
              input: typeof c.input === "object" && c.input !== null ? (c.input as Record<string, unknown>) : {},
              ...(c.kind === "client" ? { kind: "client" as const } : {}),
            },
          ]
        : [],
    );
  } catch {
    return [];
  }
}

/** A readLog row: an event's columns (null on the one row of an empty read), the session's on the first. */
type LogRow = Pick<SessionEventsTable, "type" | "content" | "tokens_in" | "tokens_out" | "tool_use_id" | "is_error"> & {
  seq: number | null;
  /** '' where it is the row before's (the first row's too, when null). */
  run_id: string | null;
  /** int8: a number on pg (the connection's parser), a number or bigint on PGlite. */
  created_ms: number | bigint;
  queued_seq: number | null;
  /** The session as SessionJson (parsed by the driver; text on a driver that does not). */
  session: SessionJson | string | null;
};

/** readLog's session column: its fields in this order, timestamps in epoch milliseconds. */
type SessionJson = [
  id: string,
  org_id: string,
  agent_id: string,
  last_seq: number,
  sandbox_id: string | null,
  active_run_id: string | null,
  run_lease_until: number | null,
  budgets: unknown,
  updated_at: number,
  created_at: number,
  now: number,
];

/**
 * A timestamptz as epoch milliseconds (int8), truncated like the driver's
 * timestamptz parser (parseTimestamptz) truncates its microseconds: the
 * same instant as a Date read from the column. (extract returns numeric,
 * exact to the microsecond, from PostgreSQL 14.)
 */
function epochMs(value: RawBuilder<unknown> | ReturnType<typeof sql.ref>) {
  return sql<number>`floor(extract(epoch from ${value}) * 1000)::int8`;
}

function toSession(
  row: Omit<Selectable<SessionsTable>, "pos" | "run_owner" | "cancel_requested" | "cancel_reason" | "budgets"> & {
    budgets?: unknown;
  },
  now: Date,
): Session {
  const leased = row.active_run_id !== null && row.run_lease_until !== null && new Date(row.run_lease_until) >= now;
  const lapsed = row.active_run_id !== null && !leased;
  return {
    id: row.id,
    orgId: row.org_id,
    agentId: row.agent_id,
    status: leased ? "running" : "idle",
    activeRunId: leased ? (row.active_run_id ?? undefined) : undefined,
    ...(lapsed ? { lapsedRunId: row.active_run_id ?? undefined } : {}),
    lastSeq: Number(row.last_seq),
    sandboxId: row.sandbox_id ?? undefined,
    // Absent from reads that name their columns (readLog).
    ...("budgets" in row ? { budgets: budgetsOf(row.budgets) } : {}),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

function toEvent(row: Omit<Selectable<SessionEventsTable>, "session_id">): SessionEvent {
  return eventOf(row, new Date(row.created_at), row.run_id);
}

/** The columns every read of events selects, integers as the driver gives them. */
interface EventColumns {
  seq: number | bigint | string | null;
  type: string;
  content: string;
  tokens_in: number | bigint | string;
  tokens_out: number | bigint | string;
  tool_use_id: string;
  is_error: boolean;
  queued_seq?: number | bigint | string | null;
}

/** One event from its row; the time and the run are read differently by listEvents and readLog. */
function eventOf(row: EventColumns, createdAt: Date, runId: string | null | undefined): SessionEvent {
  return {
    seq: Number(row.seq),
    type: row.type as EventType,
    content: row.content,
    tokensIn: Number(row.tokens_in),
    tokensOut: Number(row.tokens_out),
    toolUseId: row.tool_use_id,
    isError: row.is_error,
    createdAt,
    runId: runId ?? undefined,
    ...(row.queued_seq !== null && row.queued_seq !== undefined ? { queuedSeq: Number(row.queued_seq) } : {}),
  };
}

/** The messages of a `message_queued` event's content (`{"messages": [...], "mode"}`). */
function queuedMessagesOf(content: string): MessageInput[] {
  try {
    const parsed = JSON.parse(content) as { messages?: unknown };
    if (!Array.isArray(parsed.messages)) return [];
    return parsed.messages.flatMap(
      (m: { role?: unknown; content?: unknown; toolUseId?: unknown; isError?: unknown }) =>
        typeof m?.role === "string" && typeof m.content === "string"
          ? [
              {
                role: m.role,
                content: m.content,
                toolUseId: typeof m.toolUseId === "string" ? m.toolUseId : "",
                isError: m.isError === true,
              },
            ]
          : [],
    );
  } catch {
    return [];
  }
}
