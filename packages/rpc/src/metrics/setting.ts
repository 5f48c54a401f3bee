import { ConfigError, custom, type Field, raw } from "@platform/config";

export const METRICS_TOKEN_SETTING = "METRICS_TOKEN";

/** Shorter tokens are refused: a scrape credential must not be guessable. */
export const METRICS_TOKEN_MIN_LENGTH = 32;

/**
 * METRICS_TOKEN, read by every service that serves /metrics: unset, /metrics
 * is not served (404 like any unknown path); set, it answers the scrapers
 * that present it as a bearer token. The value never appears in an error.
 */
export function metricsTokenSetting(
  doc = `bearer token a scraper must present for \`GET /metrics\` (Prometheus text format) on every listener of this service; at least ${METRICS_TOKEN_MIN_LENGTH} characters; unset: \`/metrics\` is not served (404)`,
): Field<string | undefined> {
  return custom(METRICS_TOKEN_SETTING, {
    shown: "unset",
    doc,
    read: (env) => {
      const v = raw(env, METRICS_TOKEN_SETTING);
      if (v === undefined) return undefined;
      if (v.length < METRICS_TOKEN_MIN_LENGTH || !/^[\x21-\x7e]+$/.test(v))
        throw new ConfigError(
          METRICS_TOKEN_SETTING,
          `${METRICS_TOKEN_SETTING} must be at least ${METRICS_TOKEN_MIN_LENGTH} printable ASCII characters without spaces`,
        );
      return v;
    },
  });
}
