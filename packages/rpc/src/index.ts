export { createServiceTransport, propagateRequestIds } from "./client.ts";
export {
  acceptedId,
  currentRequest,
  type RequestInfo,
  requestInfo,
  requestInfoKey,
  runWithRequest,
} from "./context.ts";
export {
  codeNameEnvelope,
  type Envelope,
  type EnvelopeName,
  envelopeOf,
  type ReasonTable,
  reasonEnvelope,
  statusOf,
  type TransportFault,
} from "./envelope.ts";
export { errorDomain, fromConnectError, toConnectError } from "./errors.ts";
export { isPlatformStatus } from "./platform-status.ts";
export { openStream } from "./calls/open-stream.ts";
export { fixedMessage } from "./grpc/fixed-message.ts";
export { endsOnAbort, type Parkable, parkableOf, type Waiter } from "./calls/parkable.ts";
export { assertPublicTarget, isPublicAddress, publicOnlyFetch, publicOnlyLookup } from "./outbound/public-target.ts";
export {
  CORS_ALLOW_HEADERS,
  CORS_EXPOSE_HEADERS,
  CORS_SETTING,
  CorsSettingError,
  corsAllowedOriginsSetting,
  parseAllowedOrigins,
} from "./server/cors.ts";
export { HealthRegistry, healthService, ServingStatus } from "./health/health.ts";
export { METRICS_PATH } from "./metrics/metrics-endpoint.ts";
export { LATENCY_BUCKETS, ServerMetrics } from "./metrics/server-metrics.ts";
// The services register their own metrics with these (prom-client is a dependency of this package only).
export { Counter, Gauge, Histogram, type Registry } from "prom-client";
export { METRICS_TOKEN_MIN_LENGTH, METRICS_TOKEN_SETTING, metricsTokenSetting } from "./metrics/setting.ts";
export { OTEL_ENDPOINT_SETTING, otelEndpointSetting } from "./tracing/setting.ts";
export { inWorkSpan, startWorkSpan, type WorkSpan } from "./tracing/spans.ts";
export { flushTracing, startTracing, type Tracing, tracingEnabled } from "./tracing/start.ts";
export { Reflector, reflectionV1, reflectionV1alpha } from "./reflection/reflection.ts";
export {
  createServer,
  type ListenResult,
  type Server,
  type ServerOptions,
  type ServiceRegistration,
} from "./server/create-server.ts";
export type { NodeRequest, NodeResponse } from "./http/node-io.ts";
export type { RequestHead } from "./server/first-request.ts";
export type { InputRefusal } from "./server/input-guard.ts";
export { errorInterceptor } from "./server/interceptors.ts";
export { requestIdsMixin } from "./server/log-ids.ts";
export { findStringViolation, type StringProblem, type StringViolation, stringProblem } from "./server/string-guard.ts";
export { messageToJson, type OutputJsonOptions } from "./transcode/json.ts";
export { matchTemplate, type PathTemplate, parseTemplate, TemplateSyntaxError } from "./transcode/path-template.ts";
export {
  type HttpBinding,
  httpBindingsOf,
  rawBytesOf,
  sseOf,
  successStatusOf,
  tolerantBodyOf,
} from "./transcode/http-rule.ts";
export { collectRoutes, lookupRoute, type Route, RouteConfigError } from "./transcode/routes.ts";
export { escapeText, SseFramer } from "./transcode/sse.ts";
export { type CallerPolicy, callerAllowed } from "./tls/callers.ts";
export {
  internalTlsFromEnv,
  loadServiceTls,
  type ServiceTls,
  serviceNameOf,
  TLS_SETTINGS,
  TlsSettingsError,
} from "./tls/service-tls.ts";
export { type StreamCallOptions, streamCall } from "./stream-call.ts";
