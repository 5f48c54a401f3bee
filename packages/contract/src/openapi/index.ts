export { type Access, openApiDocument, type Surface } from "./document.ts";
export { ERROR_SCHEMA, type EnvelopeKind } from "./envelopes.ts";
export type { JsonStyle, Schema } from "./json-schema.ts";
export { loadProtoComments, type ProtoComments } from "./proto-comments.ts";
export { agentsSurface, identitySurface, routerSurface } from "./surfaces.ts";
