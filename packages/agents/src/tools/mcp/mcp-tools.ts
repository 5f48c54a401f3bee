import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { publicOnlyFetch } from "@platform/rpc";
import type { Logger } from "pino";
import { headersAad } from "../../domain/mcp-servers.ts";
import type { McpServer } from "../../domain/model.ts";
import type { ToolCall, ToolSpec } from "../../providers/provider.ts";
import { clip, type ToolResult } from "../toolbox.ts";
import { modelToolName, serverOf } from "./names.ts";
import { HeaderSecrets } from "./secrets.ts";

export type McpOptions = {
  secrets: HeaderSecrets;
  /** Per tool call (AGENTS_TOOL_TIMEOUT_MS, as the built-in tools). */
  callTimeoutMs: number;
  /** Connecting and listing a server's tools, once per run. */
  connectTimeoutMs: number;
  /** Bytes of a result given to the model. */
  outputLimitBytes: number;
  /** AGENTS_MCP_ALLOW_PRIVATE_TARGETS: servers on loopback and private addresses may be called. */
  allowPrivateTargets?: boolean;
};

/**
 * The SDK loads with the first run that has an MCP server: it builds its zod
 * schemas as it is imported, memory an agents process whose agents use no MCP
 * server would hold for nothing.
 */
async function mcpSdk() {
  const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
  ]);
  return { Client, StreamableHTTPClientTransport };
}

/** Tools listed per server: a server cannot flood the model's request. */
const MAX_TOOLS_PER_SERVER = 128;
const MAX_DESCRIPTION = 4096;
/** A tool whose input schema is larger is left out (as client tools' limit): it would crowd the model's request. */
const MAX_SCHEMA_BYTES = 32 * 1024;

type Listed = { client: Client; tools: Map<string, string> };
type Connection = { ok: true; listed: Listed; specs: ToolSpec[] } | { ok: false; reason: string };

/**
 * One run's MCP servers: each is connected and its tools listed once, on the
 * run's first model call (the list is kept for the run), then called over
 * the same session. Nothing here throws at the run: a server that is down,
 * slow or failing gives the model an error result, and the run's own
 * cancel is the only error passed on.
 */
export class McpTools {
  readonly #servers: Map<string, McpServer>;
  readonly #connections = new Map<string, Promise<Connection>>();
  #closed = false;

  constructor(
    private readonly orgId: string,
    servers: readonly McpServer[],
    private readonly options: McpOptions,
    private readonly logger: Logger,
  ) {
    this.#servers = new Map(servers.map((s) => [s.name, s]));
  }

  /** Whether `name` (as the model calls it) is a tool of one of the agent's servers. */
  owns(name: string): boolean {
    const server = serverOf(name);
    return server !== undefined && this.#servers.has(server);
  }

  /** The tools of every reachable server, as the model is offered them. */
  async specs(signal: AbortSignal): Promise<ToolSpec[]> {
    if (this.#servers.size === 0) return [];
    const all = await Promise.all([...this.#servers.keys()].map((name) => this.#connect(name, signal)));
    return all.flatMap((c) => (c.ok ? c.specs : []));
  }

  async run(call: ToolCall, signal: AbortSignal): Promise<ToolResult> {
    const server = serverOf(call.name) ?? "";
    const connection = await this.#connect(server, signal);
    if (!connection.ok) return failure(`MCP server "${server}" is unavailable: ${connection.reason}`);
    const tool = connection.listed.tools.get(call.name);
    if (!tool) return failure(`unknown tool "${call.name}": MCP server "${server}" does not list it`);
    const deadline = AbortSignal.timeout(this.options.callTimeoutMs);
    try {
      const result = await connection.listed.client.callTool({ name: tool, arguments: call.input }, undefined, {
        signal: AbortSignal.any([signal, deadline]),
        timeout: this.options.callTimeoutMs,
      });
      return {
        content: clip(textOf(result), this.options.outputLimitBytes),
        isError: result.isError === true,
      };
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (deadline.aborted || isTimeout(err))
        return failure(`${call.name} timed out after ${seconds(this.options.callTimeoutMs)} s`);
      this.logger.warn({ server, tool, err: messageOf(err) }, "MCP tool call failed");
      return failure(`MCP server "${server}" failed the call: ${messageOf(err)}`);
    }
  }

  /** Ends the run's sessions with its servers. */
  async close(): Promise<void> {
    this.#closed = true;
    const open = await Promise.all(this.#connections.values());
    await Promise.allSettled(open.map((c) => (c.ok ? c.listed.client.close() : undefined)));
  }

  #connect(name: string, signal: AbortSignal): Promise<Connection> {
    let connection = this.#connections.get(name);
    if (!connection) {
      connection = this.#open(name, signal);
      this.#connections.set(name, connection);
    }
    return connection;
  }

  async #open(name: string, signal: AbortSignal): Promise<Connection> {
    const server = this.#servers.get(name);
    if (!server || this.#closed) return { ok: false, reason: "not configured" };
    const timeout = this.options.connectTimeoutMs;
    const both = AbortSignal.any([signal, AbortSignal.timeout(timeout)]);
    const { Client, StreamableHTTPClientTransport } = await mcpSdk();
    const client = new Client({ name: "platform-agents", version: "0.1.0" });
    try {
      const headers = server.sealedHeaders
        ? this.options.secrets.open(server.sealedHeaders, headersAad(this.orgId, name))
        : {};
      const transport = new StreamableHTTPClientTransport(new URL(server.url), {
        requestInit: { headers },
        ...(!this.options.allowPrivateTargets && { fetch: publicOnlyFetch }),
      });
      await client.connect(transport, { signal: both, timeout });
      const tools = new Map<string, string>();
      const specs: ToolSpec[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, { signal: both, timeout });
        for (const tool of page.tools) {
          if (tools.size >= MAX_TOOLS_PER_SERVER) break;
          const modelName = modelToolName(name, tool.name);
          if (tools.has(modelName)) continue;
          if (Buffer.byteLength(JSON.stringify(tool.inputSchema)) > MAX_SCHEMA_BYTES) {
            this.logger.warn(
              { server: name, tool: tool.name.slice(0, 128) },
              "MCP tool left out: input schema over 32 KiB",
            );
            continue;
          }
          tools.set(modelName, tool.name);
          specs.push({
            name: modelName,
            description: (tool.description ?? "").slice(0, MAX_DESCRIPTION),
            inputSchema: tool.inputSchema as Record<string, unknown>,
          });
        }
        cursor = page.nextCursor;
      } while (cursor && tools.size < MAX_TOOLS_PER_SERVER);
      this.logger.info({ server: name, tools: tools.size }, "MCP server connected");
      return { ok: true, listed: { client, tools }, specs };
    } catch (err) {
      await client.close().catch(() => {});
      // The SDK's own request timeout and ours are the same length: either may fire first.
      const reason =
        !signal.aborted && (both.aborted || isTimeout(err)) ? `no answer within ${seconds(timeout)} s` : messageOf(err);
      this.logger.warn({ server: name, reason }, "MCP server unavailable for this run");
      return { ok: false, reason };
    }
  }
}

/** The model's view of a result: its text parts, and a short note for each other part. */
function textOf(result: Record<string, unknown>): string {
  const parts: string[] = [];
  const content = Array.isArray(result.content) ? (result.content as Record<string, unknown>[]) : [];
  for (const part of content) {
    if (part.type === "text" && typeof part.text === "string") parts.push(part.text);
    else if (part.type === "resource") {
      const resource = part.resource as Record<string, unknown> | undefined;
      parts.push(typeof resource?.text === "string" ? resource.text : `[resource ${String(resource?.uri ?? "")}]`);
    } else if (part.type === "resource_link") parts.push(`[resource ${String(part.uri ?? "")}]`);
    else parts.push(`[${String(part.type)} content${part.mimeType ? ` ${String(part.mimeType)}` : ""} not shown]`);
  }
  if (parts.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return parts.join("\n");
}

function failure(message: string): ToolResult {
  return { content: JSON.stringify({ error: message }), isError: true };
}

function isTimeout(err: unknown): boolean {
  return err instanceof Error && (err.name === "TimeoutError" || /timed out/i.test(err.message));
}

function messageOf(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}

function seconds(ms: number): string {
  return String(Math.round(ms / 100) / 10);
}

/** Options of a runner built without them (tests): no secrets key, the service's default timeouts. */
export function defaultMcpOptions(): McpOptions {
  return {
    secrets: new HeaderSecrets(undefined),
    callTimeoutMs: 120_000,
    connectTimeoutMs: 10_000,
    outputLimitBytes: 16 * 1024,
  };
}
