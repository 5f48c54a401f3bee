import { type Field, url } from "@platform/config";

export const OTEL_ENDPOINT_SETTING = "OTEL_EXPORTER_OTLP_ENDPOINT";

/**
 * OTEL_EXPORTER_OTLP_ENDPOINT, read by every service: the OTLP/HTTP base URL
 * spans are exported to (`/v1/traces` is appended); unset or empty, nothing
 * is exported, as the specification says.
 */
export function otelEndpointSetting(
  doc = "OTLP/HTTP base URL traces are exported to (`/v1/traces` is appended), e.g. `http://127.0.0.1:4318`; unset: no trace export",
): Field<string | undefined> {
  return url(OTEL_ENDPOINT_SETTING, { doc, protocols: ["http:", "https:"] });
}
