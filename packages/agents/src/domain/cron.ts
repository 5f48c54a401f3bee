import { PlatformError } from "@platform/errors";
import { Cron } from "croner";

/** Slots closer than this are refused: a schedule is not a busy loop (each firing is a model run). */
export const MIN_INTERVAL_MS = 60_000;
export const MAX_CRON_LENGTH = 128;
const MAX_TIME_ZONE_LENGTH = 64;
/** Enough consecutive slots to see every sub-minute gap a pattern has (they repeat within its first minute). */
const GAP_SAMPLE = 10;

/** A checked cron expression in its time zone (croner: 5 fields, or 6/7 with seconds and year). */
export class CronSchedule {
  private constructor(private readonly cron: Cron) {}

  /**
   * Parses `expression` in `timeZone`; INVALID_ARGUMENT naming the field for
   * an expression croner refuses, a zone that is not IANA's, a pattern that
   * never fires, or slots less than a minute apart.
   */
  static parse(expression: string, timeZone: string, now: Date): CronSchedule {
    checkTimeZone(timeZone);
    if (!expression || expression.trim() === "") throw PlatformError.invalidArgument("cron is required");
    if (expression.length > MAX_CRON_LENGTH)
      throw PlatformError.invalidArgument(`cron is longer than ${MAX_CRON_LENGTH} characters`);
    let cron: Cron;
    try {
      cron = new Cron(expression.trim(), { timezone: timeZone, paused: true });
    } catch (err) {
      throw PlatformError.invalidArgument(`cron is not a valid cron expression: ${messageOf(err)}`);
    }
    const schedule = new CronSchedule(cron);
    const sample = schedule.next(GAP_SAMPLE, now);
    if (sample.length === 0) throw PlatformError.invalidArgument("cron never fires (no date matches it)");
    for (let i = 1; i < sample.length; i++)
      if (sample[i].getTime() - sample[i - 1].getTime() < MIN_INTERVAL_MS)
        throw PlatformError.invalidArgument(
          `cron fires more often than once a minute (${sample[i - 1].toISOString()} then ${sample[i].toISOString()}); the minimum interval is 60 s`,
        );
    return schedule;
  }

  /** The next `n` slots strictly after `after`. */
  next(n: number, after: Date): Date[] {
    if (n <= 0) return [];
    return this.cron.nextRuns(n, after);
  }

  /** The first slot strictly after `after`, or null when the pattern has no more. */
  nextAfter(after: Date): Date | null {
    return this.cron.nextRun(after);
  }

  /** The latest slot at or before `now`, if any. */
  latestAtOrBefore(now: Date): Date | undefined {
    // previousRuns is strictly before its reference and works in whole seconds.
    const candidates = this.cron.previousRuns(2, new Date(now.getTime() + 1000));
    return candidates.find((d) => d.getTime() <= now.getTime());
  }
}

/** An IANA zone name Node's ICU knows (`Europe/Berlin`, `UTC`); INVALID_ARGUMENT naming timeZone otherwise. */
export function checkTimeZone(timeZone: string): void {
  if (timeZone.length > MAX_TIME_ZONE_LENGTH)
    throw PlatformError.invalidArgument(`timeZone is longer than ${MAX_TIME_ZONE_LENGTH} characters`);
  try {
    new Intl.DateTimeFormat("en-US", { timeZone });
  } catch {
    throw PlatformError.invalidArgument(
      `timeZone is not an IANA time zone: "${timeZone}" (e.g. "Europe/Berlin", "UTC")`,
    );
  }
}

function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}
