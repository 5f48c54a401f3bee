import type { Field } from "./field.ts";
import { custom, oneOf, text } from "./fields.ts";

/** pino's levels: what LOG_LEVEL accepts unless a service narrows it. */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/**
 * HOST, the one listening-address setting of every service (the launcher
 * sets it for each child; the Kubernetes manifests set 0.0.0.0).
 */
export function host(doc = "listening address; `0.0.0.0` in the Kubernetes manifests"): Field<string> {
  return text("HOST", { default: "127.0.0.1", doc });
}

/**
 * The V8 semi-space bound of every platform Node process (services and tenant
 * workers), MiB. Node 20 lets each semi-space grow to 16 MiB, start-up grows
 * it that far and an idle process keeps it; at this bound the whole platform
 * idles ~85 MiB lower for no measurable CPU over sign-ins and sandbox turns
 * (README, Memory), and a tenant worker relaying a token stream runs no
 * mark-compact (up to 11 ms with the default; issue 26, token-latency).
 */
export const SEMI_SPACE_MIB = 2;

/** LOG_LEVEL, the one log-level setting of every service (default info). */
export function logLevel<const T extends string = (typeof LOG_LEVELS)[number]>(
  levels: readonly T[] = LOG_LEVELS as unknown as readonly T[],
  doc = `log lines at this level or above: ${levels.join(", ")}`,
): Field<T> {
  return oneOf("LOG_LEVEL", levels, { default: "info" as T, doc });
}

/**
 * The internal TLS rows of a service's settings table (TLS_CA_FILE,
 * TLS_CERT_FILE, TLS_KEY_FILE; INTERNAL_TLS). They are read by
 * @platform/rpc's internalTlsFromEnv in each main.ts; listed here so the
 * table is whole. `files` says which certificate, `off` what turning it off does.
 */
export function internalTlsRows(doc: { files: string; off: string }) {
  return {
    tlsFiles: custom(["TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE"], {
      shown: "required",
      doc: doc.files,
      read: () => undefined,
    }),
    internalTls: custom("INTERNAL_TLS", { shown: "on", doc: doc.off, read: () => undefined }),
  };
}
