export { type Database, type DatabaseOptions, openDatabase } from "./connect.ts";
export {
  DATABASE_DOWN_RETRY_AFTER_SECONDS,
  isDatabaseUnavailable,
  isSerializationFailure,
  isUniqueViolation,
  mapDatabaseError,
  sqlState,
} from "./errors.ts";
export { GuardedPool, POOL_BOUNDS_DEFAULTS, type PoolBounds } from "./pool-guard.ts";
export { type ChannelHandlers, ChannelListener } from "./listen.ts";
export { type Migration, migrate } from "./migrate.ts";
export { PollLoop } from "./poll-loop.ts";
export { prepared, preparedQuery, type RunPrepared, statementRunner } from "./prepared.ts";
