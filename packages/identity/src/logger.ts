import { requestIdsMixin } from "@platform/rpc";
import { type DestinationStream, type Logger, pino } from "pino";

/**
 * The service logger: pino JSON. Credentials are never logged on purpose;
 * the redaction list is a second line of defence for objects that reach a
 * log call by accident (headers, request bodies, errors with context).
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      name: "identity",
      level,
      // The request and trace id of the request being served, on every line written for it.
      mixin: requestIdsMixin,
      redact: {
        paths: [
          "authorization",
          "*.authorization",
          "headers.authorization",
          "*.headers.authorization",
          "password",
          "*.password",
          "refresh_token",
          "*.refresh_token",
          "refreshToken",
          "*.refreshToken",
          "raw_key",
          "*.raw_key",
          "rawKey",
          "*.rawKey",
          "privateKey",
          "*.privateKey",
          "kek",
          "*.kek",
        ],
        censor: "[redacted]",
      },
    },
    destination,
  );
}
