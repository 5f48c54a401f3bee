export {
  createServer,
  type ListenResult,
  type Server,
  type ServerOptions,
  type ServiceRegistration,
} from "./server/create-server.ts";
export { errorInterceptor } from "./server/interceptors.ts";
export { toConnectError, fromConnectError, errorDomain } from "./errors.ts";
export { type Envelope, type EnvelopeName, type TransportFault, envelopeOf, statusOf } from "./envelope.ts";
export {
  type RequestInfo,
  requestInfoKey,
  requestInfo,
  currentRequest,
  runWithRequest,
} from "./context.ts";
export { HealthRegistry, ServingStatus, healthService } from "./health/health.ts";
export { Reflector, reflectionV1, reflectionV1alpha } from "./reflection/reflection.ts";
export { createServiceTransport, propagateRequestIds } from "./client.ts";
export { parseTemplate, matchTemplate, type PathTemplate, TemplateSyntaxError } from "./transcode/path-template.ts";
export { collectRoutes, lookupRoute, type Route, RouteConfigError } from "./transcode/routes.ts";
export { type OutputJsonOptions, messageToJson } from "./transcode/json.ts";
export { SseFramer, escapeText } from "./transcode/sse.ts";
