export { type Database, type DatabaseOptions, openDatabase } from "./connect.ts";
export { isSerializationFailure, isUniqueViolation, sqlState } from "./errors.ts";
export { type ChannelHandlers, ChannelListener } from "./listen.ts";
export { type Migration, migrate } from "./migrate.ts";
