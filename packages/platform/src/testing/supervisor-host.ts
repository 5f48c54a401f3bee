// A launcher reduced to its supervisor, for the test that kills it: starts the
// stand-in service (fake-service.ts) on FAKE_PORT and prints `ready <pid>` with
// the service's pid, then supervises it until it is killed.
import { ServiceLog } from "../launcher/service-log.ts";
import { Supervisor } from "../launcher/supervisor.ts";

const port = process.env.FAKE_PORT!;
const supervisor = new Supervisor({
  log: () => {},
  policy: { initialDelayMs: 100, maxDelayMs: 1000, healthyAfterMs: 60_000, maxCrashes: 5, windowMs: 600_000 },
  serviceLog: (name) =>
    new ServiceLog(name, {
      level: "error",
      dir: process.env.LOG_DIR!,
      maxFileBytes: 1 << 20,
      secrets: [],
      console: () => {},
    }),
  onGiveUp: () => {},
});
await supervisor.start({
  name: "orphan",
  entry: new URL("./fake-service.ts", import.meta.url).pathname,
  readyUrl: `http://127.0.0.1:${port}/livez`,
  env: { FAKE_PORT: port },
});
process.stdout.write(`ready ${supervisor.status().orphan!.pid}\n`);
