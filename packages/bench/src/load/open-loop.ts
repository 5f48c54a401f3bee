/** What an open-loop run measured: each completed call's latency (ns) from its scheduled send time. */
export type OpenLoopResult = {
  samples: number[];
  failures: number;
  sent: number;
  total: number;
  /** The offer stopped early: a second's worth of calls was outstanding. */
  gaveUp: boolean;
  wall: number;
  completedPerSecond: number;
};

/**
 * Offers `call` at `rate`/s for `seconds` regardless of completions (open
 * loop); latency counts from each call's scheduled time, so a stall is not
 * hidden by the client waiting (no coordinated omission). Stops offering
 * once a second's worth of calls is outstanding: the service cannot keep up.
 */
export async function openLoop(call: () => Promise<unknown>, rate: number, seconds: number): Promise<OpenLoopResult> {
  const total = Math.round(rate * seconds);
  const samples: number[] = [];
  const inflight: Promise<void>[] = [];
  let failures = 0;
  let sent = 0;
  let done = 0;
  let gaveUp = false;
  const start = process.hrtime.bigint();
  while (sent < total) {
    if (sent - done > rate) {
      gaveUp = true;
      break;
    }
    const elapsed = Number(process.hrtime.bigint() - start);
    const due = Math.min(total, Math.floor((elapsed / 1e9) * rate) + 1);
    for (; sent < due; sent++) {
      const scheduled = start + BigInt(Math.round((sent / rate) * 1e9));
      inflight.push(
        call().then(
          () => {
            done++;
            samples.push(Number(process.hrtime.bigint() - scheduled));
          },
          () => {
            done++;
            failures++;
          },
        ),
      );
    }
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(inflight);
  const wall = Number(process.hrtime.bigint() - start) / 1e9;
  return { samples, failures, sent, total, gaveUp, wall, completedPerSecond: done / wall };
}
