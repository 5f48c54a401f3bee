export { ConfigError } from "./config-error.ts";
export { host, internalTlsRows, LOG_LEVELS, logLevel, SEMI_SPACE_MIB } from "./conventions.ts";
export { parseDuration } from "./duration.ts";
export { type Env, type Field, raw, readSettings, type Values } from "./field.ts";
export {
  bool,
  checkUrl,
  custom,
  duration,
  formatDuration,
  int,
  list,
  oneOf,
  port,
  replaced,
  text,
  url,
} from "./fields.ts";
export { listSettingsIfAsked, readmeSettings, SETTINGS_END, settingsBegin, settingsTable } from "./listing.ts";
