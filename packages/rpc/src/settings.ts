// The settings a service declares from this package and the internal TLS it
// reads at start, without the server: a service's `--settings` and its
// exit on a bad setting load only these (the whole package took ~1.4 s of CPU).

export { METRICS_TOKEN_MIN_LENGTH, METRICS_TOKEN_SETTING, metricsTokenSetting } from "./metrics/setting.ts";
export { CORS_SETTING, CorsSettingError, corsAllowedOriginsSetting } from "./server/cors.ts";
export { internalTlsFromEnv, loadServiceTls, type ServiceTls, TlsSettingsError } from "./tls/service-tls.ts";
export { OTEL_ENDPOINT_SETTING, otelEndpointSetting } from "./tracing/setting.ts";
