// Tenant worker process: `node --import tsx packages/runtime/src/worker/main.ts`
// with TENANT_ID, ORG_ID, AGENTS_GRPC_URL, PORT (default 50051).
import { pino } from "pino";
import { ConfigError } from "../config/env.ts";
import { workerConfig } from "./config.ts";
import { startWorker } from "./worker.ts";

let config: ReturnType<typeof workerConfig>;
try {
  config = workerConfig(process.env);
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`runtime worker: ${err.message}`);
    process.exit(2);
  }
  throw err;
}

const logger = pino({ name: "runtime-worker", level: config.logLevel, base: { tenantId: config.tenantId } });
const server = await startWorker(config, { logger });
logger.info({ port: server.port }, "tenant worker serving");

let stopping = false;
async function stop(reason: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ reason }, "tenant worker stopping");
  const force = setTimeout(() => process.exit(1), 5000);
  force.unref();
  await server.close();
  process.exit(0);
}
process.on("SIGTERM", () => void stop("SIGTERM"));
process.on("SIGINT", () => void stop("SIGINT"));
if (config.exitWithStdin) {
  process.stdin.on("end", () => void stop("parent gone"));
  process.stdin.on("error", () => void stop("parent gone"));
  process.stdin.resume();
}
