import type { Logger } from "pino";
import type { Agent, Session } from "../domain/model.ts";
import type { ExecOptions, Sandboxes } from "../domain/ports.ts";
import {
  type BudgetHit,
  type Budgets,
  budgetReached,
  EMPTY_USAGE,
  effectiveBudgets,
  type UsageRow,
  type UsageStore,
  type UsageTotals,
} from "../domain/usage.ts";

type Context = { orgId: string; agentId: string; sessionId: string; runId: string };

/**
 * One run's usage: the session's totals when the run took it (one run per
 * session, so nothing else adds to them meanwhile) plus what this run
 * used, against the session's budgets. Each model call and each tool call
 * becomes a timestamped row, written in the background (a write that fails
 * is retried, so a database outage does not stop the run) and awaited at
 * the run's end.
 */
export class UsageMeter {
  readonly #used: UsageTotals;
  readonly #pending: UsageRow[] = [];
  #writing: Promise<void> | undefined;
  /** CPU and wall time of the sandbox commands of the tool call running now. */
  #execCpuMs = 0;
  #execWallMs = 0;

  private constructor(
    private readonly store: UsageStore | undefined,
    private readonly context: Context,
    readonly budgets: Budgets,
    used: UsageTotals,
    private readonly logger: Logger,
  ) {
    this.#used = { ...used, models: [] };
  }

  /** The session's totals so far (one read), for a run that holds it. Without a store: nothing is metered. */
  static async load(
    store: UsageStore | undefined,
    agent: Agent,
    session: Session,
    runId: string,
    logger: Logger,
  ): Promise<UsageMeter> {
    const context = { orgId: session.orgId, agentId: agent.id, sessionId: session.id, runId };
    const budgets = effectiveBudgets(agent.budgets ?? {}, session.budgets ?? {});
    const used = store ? await store.totals(session.orgId, { sessionId: session.id }) : EMPTY_USAGE;
    return new UsageMeter(store, context, budgets, used, logger);
  }

  /** The first budget the session has reached, if any. */
  reached(): BudgetHit | undefined {
    return budgetReached(this.budgets, this.#used);
  }

  /** A model call's tokens (its provider's final running totals). */
  model(model: string, inputTokens: number, outputTokens: number): void {
    this.#used.inputTokens += inputTokens;
    this.#used.outputTokens += outputTokens;
    this.#used.modelCalls++;
    this.#add({ kind: "model", model, inputTokens, outputTokens });
  }

  /** A tool call that ran, with the sandbox time its commands took since the previous one. */
  tool(name: string): void {
    const cpuMs = this.#execCpuMs;
    const wallMs = this.#execWallMs;
    this.#execCpuMs = 0;
    this.#execWallMs = 0;
    this.#used.toolCalls++;
    this.#used.cpuMs += cpuMs;
    this.#used.wallMs += wallMs;
    this.#add({ kind: "tool", tool: name, cpuMs, wallMs });
  }

  /** `sandboxes` whose commands' CPU and wall time (as compute reports them) count for the tool call running. */
  sandboxes(sandboxes: Sandboxes): Sandboxes {
    const exec = async (sandboxId: string, command: string, args: string[], options: ExecOptions) => {
      const result = await sandboxes.exec(sandboxId, command, args, options);
      this.#execCpuMs += result.usage?.cpuMs ?? 0;
      this.#execWallMs += result.usage?.wallMs ?? 0;
      return result;
    };
    return new Proxy(sandboxes, {
      get: (target, key) => {
        if (key === "exec") return exec;
        const value = Reflect.get(target, key, target) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  }

  /** Waits (up to `patienceMs`) for the rows written so far; a row the database never took is logged. */
  async flush(patienceMs = 5000): Promise<void> {
    const done = (async () => {
      while (this.#writing) await this.#writing;
    })();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([done, new Promise<void>((resolve) => (timer = setTimeout(resolve, patienceMs).unref()))]);
    clearTimeout(timer);
  }

  #add(row: Omit<UsageRow, keyof Context | "at">): void {
    if (!this.store) return;
    this.#pending.push({ ...this.context, ...row, at: new Date() });
    this.#kick();
  }

  /** One writer at a time; rows added while it finishes get the next. */
  #kick(): void {
    if (this.#writing || !this.store || this.#pending.length === 0) return;
    this.#writing = this.#write().finally(() => {
      this.#writing = undefined;
      this.#kick();
    });
  }

  async #write(): Promise<void> {
    let backoff = 100;
    let attempts = 0;
    while (this.#pending.length > 0 && this.store) {
      const batch = this.#pending.splice(0);
      try {
        await this.store.record(batch);
        backoff = 100;
        attempts = 0;
      } catch (err) {
        // Kept and retried: an outage shorter than a minute loses no usage.
        if (++attempts > 30) {
          this.logger.error({ err, rows: batch.length }, "usage rows could not be stored; dropped");
          continue;
        }
        this.logger.warn({ err }, "could not store usage rows; retrying");
        this.#pending.unshift(...batch);
        await new Promise((resolve) => setTimeout(resolve, backoff).unref());
        backoff = Math.min(2000, backoff * 2);
      }
    }
  }
}
