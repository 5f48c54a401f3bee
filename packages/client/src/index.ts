// @platform/client: the platform's client SDK (Node 20+ and browsers).
export {
  AgentsApi,
  ApiKeysApi,
  type InvokeEvent,
  type MessageInput,
  type Page,
  PlatformClient,
  type PlatformClientOptions,
  type SendMode,
  type SendOptions,
  SessionsApi,
  type StreamOptions,
} from "./client.ts";
export { type Tokens, jwtExpiry } from "./auth.ts";
export {
  type ChatEvent,
  type DoneEvent,
  type ErrorEvent,
  isTerminal,
  type OtherEvent,
  type SandboxEvent,
  type TextEvent,
  type ToolOutputEvent,
  type ToolResultEvent,
  type ToolUseEvent,
} from "./events.ts";
export { ClientReason, errorFromResponse, isPlatformError, toPlatformError } from "./errors.ts";
export type { ResumeOptions } from "./follow.ts";
export { type Authorizer, createRestTransport, type RestTransportOptions } from "./rest/rest-transport.ts";
// The one error type of the platform, and the reasons it carries.
export {
  AgentsCode,
  AuthReason,
  Code,
  EdgeCode,
  ErrorAction,
  IdentityRestCode,
  PlatformError,
} from "@platform/errors";
export type { Agent, PendingToolCall, Session, SessionEvent } from "@platform/gen/agents/v1/agents_pb";
export type { APIKey, CreateAPIKeyResponse, User } from "@platform/gen/identity/v1/rest_pb";
