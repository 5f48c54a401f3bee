import { PlatformError } from "@platform/errors";
import type { McpServer } from "./model.ts";

/**
 * Seals an MCP server's header values for storage (tools/mcp/secrets.ts:
 * AES-256-GCM under AGENTS_SECRETS_KEY); `aad` binds them to their place.
 */
export interface HeaderSealer {
  seal(headers: Readonly<Record<string, string>>, aad: string): string;
}

/** What binds a server's sealed headers to their org and server. */
export function headersAad(orgId: string, server: string): string {
  return `agents.mcp_headers:${orgId}:${server}`;
}

/** An MCP server as a create or update gives it (header values in the clear, once). */
export type McpServerInput = { name: string; url: string; headers?: Readonly<Record<string, string>> };

export const MAX_MCP_SERVERS = 8;
export const MAX_MCP_HEADERS = 16;
const MAX_URL = 2048;
const MAX_HEADER_VALUE = 4096;
/** No `__` (the separator of `<server>__<tool>`) and no trailing `_`, so a tool name splits one way. */
const SERVER_NAME = /^[a-z0-9_-]{1,32}$/;
const HEADER_NAME = /^[A-Za-z0-9-]{1,64}$/;
/** Headers the transport sets itself: a server's own would break the protocol. */
const RESERVED_HEADERS = new Set([
  "host",
  "content-length",
  "content-type",
  "accept",
  "connection",
  "transfer-encoding",
  "mcp-session-id",
  "mcp-protocol-version",
  "last-event-id",
]);

/**
 * Checks one server and seals its headers; INVALID_ARGUMENT names the
 * entry (never a header's value).
 */
function checked(input: McpServerInput, i: number, orgId: string, sealer: HeaderSealer | undefined): McpServer {
  const at = `mcpServers[${i}]`;
  if (!SERVER_NAME.test(input.name) || input.name.includes("__") || input.name.endsWith("_"))
    throw PlatformError.invalidArgument(
      `${at}.name must be 1 to 32 characters of a-z 0-9 _ -, without "__" and not ending with "_"`,
    );
  if (input.url.length > MAX_URL) throw PlatformError.invalidArgument(`${at}.url is longer than ${MAX_URL} characters`);
  let url: URL;
  try {
    url = new URL(input.url);
  } catch {
    throw PlatformError.invalidArgument(`${at}.url is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw PlatformError.invalidArgument(`${at}.url must be http or https`);
  if (url.username || url.password)
    throw PlatformError.invalidArgument(`${at}.url must not carry credentials: give them as headers`);
  const headers = Object.entries(input.headers ?? {});
  if (headers.length > MAX_MCP_HEADERS)
    throw PlatformError.invalidArgument(`${at}.headers has more than ${MAX_MCP_HEADERS} entries`);
  const seen = new Set<string>();
  for (const [name, value] of headers) {
    if (!HEADER_NAME.test(name))
      throw PlatformError.invalidArgument(`${at}.headers: a name is 1 to 64 characters of A-Z a-z 0-9 -`);
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower))
      throw PlatformError.invalidArgument(`${at}.headers["${name}"] is set by the transport itself`);
    if (seen.has(lower)) throw PlatformError.invalidArgument(`${at}.headers["${name}"] is given twice`);
    seen.add(lower);
    if (value.length > MAX_HEADER_VALUE || /[\r\n\0]/.test(value))
      throw PlatformError.invalidArgument(
        `${at}.headers["${name}"]: a value is at most ${MAX_HEADER_VALUE} characters without CR, LF or NUL`,
      );
  }
  if (headers.length > 0 && !sealer)
    throw PlatformError.failedPrecondition(
      "MCP server headers are stored encrypted and this service has no AGENTS_SECRETS_KEY: set it, or give the server no headers",
    );
  return {
    name: input.name,
    url: input.url,
    headerNames: headers.map(([name]) => name),
    ...(headers.length > 0 && sealer
      ? { sealedHeaders: sealer.seal(Object.fromEntries(headers), headersAad(orgId, input.name)) }
      : {}),
  };
}

/** The servers of a create: each checked, names unique, at most 8. */
export function validateMcpServers(
  inputs: readonly McpServerInput[],
  orgId: string,
  sealer: HeaderSealer | undefined,
): McpServer[] {
  if (inputs.length > MAX_MCP_SERVERS)
    throw PlatformError.invalidArgument(`mcpServers has more than ${MAX_MCP_SERVERS} entries`);
  const servers = inputs.map((s, i) => checked(s, i, orgId, sealer));
  unique(servers.map((s) => s.name));
  return servers;
}

/**
 * An update's servers merged into `current` by name: an entry replaces the
 * server of its name (headers included) or adds it; one with an empty url
 * removes it.
 */
export function mergeMcpServers(
  current: readonly McpServer[],
  inputs: readonly McpServerInput[],
  orgId: string,
  sealer: HeaderSealer | undefined,
): McpServer[] {
  unique(inputs.map((s) => s.name));
  const merged = new Map(current.map((s) => [s.name, s]));
  inputs.forEach((input, i) => {
    if (input.url === "") {
      if (!merged.delete(input.name))
        throw PlatformError.invalidArgument(
          `mcpServers[${i}]: the agent has no MCP server "${input.name.slice(0, 40)}" to remove`,
        );
    } else merged.set(input.name, checked(input, i, orgId, sealer));
  });
  if (merged.size > MAX_MCP_SERVERS)
    throw PlatformError.invalidArgument(`the agent would have more than ${MAX_MCP_SERVERS} MCP servers`);
  return [...merged.values()];
}

function unique(names: readonly string[]): void {
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name)) throw PlatformError.invalidArgument(`mcpServers names "${name.slice(0, 40)}" twice`);
    seen.add(name);
  }
}
