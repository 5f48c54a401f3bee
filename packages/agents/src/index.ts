// The agents service: domain, adapters and server. `main.ts` runs it as a
// process; the launcher and other packages' tests can embed it from here.

export { ComputeSandboxes } from "./adapters/compute.ts";
export { COMPUTE_DIRECT, computeTransport, grpcTransport } from "./adapters/grpc-transport.ts";
export { IdentityAuthenticator } from "./adapters/identity.ts";
export { type AgentsApp, type AgentsAppOptions, createAgentsApp } from "./app.ts";
export { type AgentsConfig, ConfigError, loadConfig } from "./config.ts";
export { AgentsDomain } from "./domain/agents.ts";
export type { Agent, AuthContext, Session, SessionEvent } from "./domain/model.ts";
export type { Authenticator, Sandboxes } from "./domain/ports.ts";
export type { Store } from "./domain/store.ts";
export { type AgentsServer, createAgentsServer, providersFrom } from "./process.ts";
export { AnthropicProvider } from "./providers/anthropic.ts";
export { DevModel } from "./providers/dev.ts";
export { OpenAIProvider } from "./providers/openai.ts";
export type {
  ModelEvent,
  ModelMessage,
  ModelProvider,
  ModelRequest,
  ToolCall,
  ToolSpec,
} from "./providers/provider.ts";
export { ProviderRegistry } from "./providers/registry.ts";
export { TOOL_SPECS } from "./tools/toolbox.ts";
