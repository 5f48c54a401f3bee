import { createHash } from "node:crypto";

/** Between a server's name and its tool's in the name the model sees. */
export const SEPARATOR = "__";
/** Anthropic's and OpenAI's rule for a tool (function) name. */
const PROVIDER_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * The name the model sees for `tool` of `server`: `<server>__<tool>`. An
 * MCP tool name may have characters (`.`, `/`) or a length the providers
 * refuse: those become `_`, and a name cut to 64 characters ends with a
 * hash of the original, so two long names stay distinct.
 */
export function modelToolName(server: string, tool: string): string {
  const full = `${server}${SEPARATOR}${tool}`;
  if (PROVIDER_NAME.test(full)) return full;
  const cleaned = `${server}${SEPARATOR}${tool.replace(/[^a-zA-Z0-9_-]/g, "_")}`;
  if (cleaned.length <= 64) return cleaned;
  const hash = createHash("sha256").update(tool).digest("hex").slice(0, 8);
  return `${cleaned.slice(0, 64 - 9)}_${hash}`;
}

/** The server a model tool name belongs to, by its prefix; undefined for other tools. */
export function serverOf(name: string): string | undefined {
  const at = name.indexOf(SEPARATOR);
  return at > 0 ? name.slice(0, at) : undefined;
}
