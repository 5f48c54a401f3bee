import type { Logger } from "pino";
import type { Controller } from "./controller.ts";

export interface SweepSchedule {
  /** IdleSweep period (spec: every 5 minutes). */
  idleEveryMs?: number;
  /** WeeklySweep period (spec: daily). */
  weeklyEveryMs?: number;
  logger?: Logger;
}

/**
 * Runs IdleSweep every 5 minutes and WeeklySweep daily until stopped. A
 * sweep never overlaps itself; errors are logged and the next tick retries.
 */
export function startSweeps(controller: Controller, schedule: SweepSchedule = {}): { stop(): void } {
  const log = schedule.logger;
  const every = (ms: number, name: string, run: () => Promise<unknown>) => {
    let busy = false;
    const timer = setInterval(() => {
      if (busy) return;
      busy = true;
      run()
        .catch((err) => log?.error({ err: String(err) }, `${name} failed`))
        .finally(() => {
          busy = false;
        });
    }, ms);
    timer.unref();
    return timer;
  };
  const timers = [
    every(schedule.idleEveryMs ?? 5 * 60_000, "idle sweep", () => controller.idleSweep()),
    every(schedule.weeklyEveryMs ?? 24 * 60 * 60_000, "weekly sweep", () => controller.weeklySweep()),
  ];
  return {
    stop() {
      for (const t of timers) clearInterval(t);
    },
  };
}
