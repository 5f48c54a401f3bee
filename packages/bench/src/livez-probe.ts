// `node livez-probe.ts <duration-ms> <interval-ms> <base-url>...`: GET /livez
// of each base URL on a fixed schedule (one request per URL every interval,
// whether or not the previous ones have answered, so a stall counts as the
// latencies of every probe it held, not as one slow sample) and prints the
// latencies (ms) per URL as JSON. It runs in its own process so the load
// generator's event loop does not add to what it measures; probing several
// servers from one process gives each the same client-side delays.
import * as http from "node:http";
import { annotateErrors, keepAliveAgent, stampFrees } from "./socket-reuse.ts";

const [durationArg, intervalArg, ...bases] = process.argv.slice(2);
const durationMs = Number(durationArg);
const intervalMs = Number(intervalArg);
const agent = keepAliveAgent(Number.POSITIVE_INFINITY);
stampFrees(agent);
// Each failure's description (status, or the error with how its socket was used), in order.
const results = bases.map(() => ({ samples: [] as number[], failures: 0, errors: [] as string[] }));
const pending = new Set<Promise<void>>();

function probe(url: URL, into: { samples: number[]; failures: number; errors: string[] }): Promise<void> {
  const t0 = process.hrtime.bigint();
  return new Promise<void>((resolve) => {
    const req = http.get(url, { agent, timeout: 30_000 }, (res) => {
      res.resume();
      res.on("end", () => {
        if (res.statusCode === 200) into.samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
        else {
          into.failures++;
          into.errors.push(`status ${res.statusCode}`);
        }
        resolve();
      });
    });
    annotateErrors(req);
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (err) => {
      into.failures++;
      into.errors.push(`${((performance.now() - start) / 1000).toFixed(1)} s in: ${err.message}`);
      resolve();
    });
  });
}

const urls = bases.map((b) => new URL("/livez", b));
const start = performance.now();
for (let i = 0; ; i++) {
  const due = start + i * intervalMs;
  if (due - start >= durationMs) break;
  const wait = due - performance.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  for (const [k, url] of urls.entries()) {
    const p = probe(url, results[k]!).finally(() => pending.delete(p));
    pending.add(p);
  }
}
await Promise.all(pending);
agent.destroy();
process.stdout.write(JSON.stringify(results));
