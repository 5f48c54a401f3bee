import type { RotationPolicy, RotationStep, SigningKeys } from "./signing-keys.ts";

export type RotationSchedule = { stop(): Promise<void> };

/**
 * Runs advanceRotation in the service every tick. Every replica runs it: the
 * step's row lock makes them take turns and the later ones find nothing due.
 * Off (no timer) when the policy has no interval. The tick is a quarter of
 * the shortest period so that a step happens at most that late, at most a
 * minute.
 */
export function startRotationSchedule(
  keys: SigningKeys,
  policy: RotationPolicy,
  report: { step(step: RotationStep): void; error(err: unknown): void },
): RotationSchedule {
  if (policy.intervalMs === undefined) return { stop: async () => {} };
  const tickMs = Math.min(60_000, Math.max(100, Math.floor(Math.min(policy.prePublishMs, policy.retentionMs) / 4)));
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const tick = () => {
    running = keys.advanceRotation(policy).then(
      (step) => {
        if (step.published || step.activated || step.retired.length) report.step(step);
      },
      (err: unknown) => report.error(err),
    );
    void running.then(() => {
      if (!stopped) schedule();
    });
  };
  const schedule = () => {
    timer = setTimeout(tick, tickMs);
    timer.unref();
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
