export { openDatabase, type Database, type DatabaseOptions } from "./connect.ts";
export { migrate, type Migration } from "./migrate.ts";
export { isSerializationFailure, isUniqueViolation, sqlState } from "./errors.ts";
