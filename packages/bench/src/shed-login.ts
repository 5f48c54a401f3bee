import type { HttpLoadClient } from "./http-load-client.ts";

/** Answers a shedding identity gave (503 with Retry-After), by the phase of a figure they came in. */
export type ShedCounts<P extends string> = Record<P, number>;

/**
 * One POST /v1/auth/login as a well-behaved client makes it. Beyond
 * ARGON2_MAX_QUEUE, or when the next hash would wait past MAX_HASH_WAIT_MS
 * (a loaded machine: CI's tests beside the smoke run), identity sheds with
 * 503 and Retry-After (issue 15): the client waits as told (50 ms to 5 s) and
 * returns; the answer is counted in `shed[phase]`, neither a failure nor a
 * login. Anything else but 200 is an error.
 */
export function shedAwareLogin<P extends string>(
  http: HttpLoadClient,
  body: unknown,
  shed: ShedCounts<P>,
  phase: P,
  clients: number,
): () => Promise<void> {
  return async () => {
    const res = await http.postJson("/v1/auth/login", body);
    if (res.status === 503) {
      shed[phase]++;
      const after = Number((JSON.parse(res.text) as { retry_after?: string }).retry_after ?? "1");
      await new Promise((r) => setTimeout(r, Math.min(5, Math.max(0.05, after)) * 1000));
      return;
    }
    if (res.status !== 200) throw new Error(`login: ${res.status} ${res.text} (${clients} clients)`);
  };
}
