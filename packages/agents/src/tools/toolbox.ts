import { PlatformError } from "@platform/errors";
import type { Workspace } from "../domain/ports.ts";
import type { ToolCall, ToolSpec } from "../providers/provider.ts";

export type OutputListener = (stream: "stdout" | "stderr", data: Uint8Array) => void;

/** What the model is given back for one tool call. */
export type ToolResult = { content: string; isError: boolean };

export type ToolboxOptions = {
  /** Per-tool deadline; past it the call yields an error result. */
  timeoutMs: number;
  /** Bytes of tool output given to the model (default 16 KiB). */
  outputLimitBytes: number;
};

export const TOOL_SPECS: ToolSpec[] = [
  {
    name: "bash",
    description:
      "Run a shell command in the session's sandbox (working directory /workspace). Returns stdout, stderr and the exit code.",
    inputSchema: {
      type: "object",
      properties: { command: { type: "string", description: "The command line, run by bash -c" } },
      required: ["command"],
    },
  },
  {
    name: "read_file",
    description: "Read a text file of the workspace.",
    inputSchema: {
      type: "object",
      properties: { path: { type: "string", description: "Path relative to /workspace" } },
      required: ["path"],
    },
  },
  {
    name: "write_file",
    description: "Create or overwrite a file of the workspace.",
    inputSchema: {
      type: "object",
      properties: { path: { type: "string", description: "Path relative to /workspace" }, content: { type: "string" } },
      required: ["path", "content"],
    },
  },
  {
    name: "list_files",
    description: "List a directory of the workspace.",
    inputSchema: {
      type: "object",
      properties: {
        path: { type: "string", description: "Directory relative to /workspace; . for the root" },
        recursive: { type: "boolean" },
      },
      required: ["path"],
    },
  },
];

const LIST_MAX_ENTRIES = 500;

/**
 * Runs the model's tool calls in the session's sandbox. A tool never throws:
 * failures, bad input and timeouts become error results the model can read,
 * so one bad call does not end the turn. Results are JSON objects capped at
 * `outputLimitBytes`.
 */
export class Toolbox {
  constructor(private readonly options: ToolboxOptions) {}

  get specs(): ToolSpec[] {
    return TOOL_SPECS;
  }

  /**
   * Runs one call in `workspace` (the session's sandbox, owned by the run).
   * `onOutput` receives a command's output chunks as they come (bash only).
   */
  async run(call: ToolCall, workspace: Workspace, signal: AbortSignal, onOutput?: OutputListener): Promise<ToolResult> {
    if (!TOOL_SPECS.some((t) => t.name === call.name)) return failure(`unknown tool "${call.name}"`);
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), this.options.timeoutMs);
    const both = AbortSignal.any([signal, deadline.signal]);
    try {
      const work = this.#dispatch(call, workspace, both, onOutput);
      const timedOut = new Promise<never>((_, reject) => {
        both.addEventListener("abort", () => reject(both.reason), { once: true });
      });
      const result = await Promise.race([work, timedOut]);
      return { content: this.#cap(JSON.stringify(result)), isError: false };
    } catch (err) {
      if (signal.aborted) throw err;
      if (deadline.signal.aborted)
        return failure(`${call.name} timed out after ${Math.round(this.options.timeoutMs / 1000)} s`);
      return failure(err instanceof PlatformError ? err.message : "tool call failed");
    } finally {
      clearTimeout(timer);
    }
  }

  async #dispatch(
    call: ToolCall,
    workspace: Workspace,
    signal: AbortSignal,
    onOutput?: OutputListener,
  ): Promise<Record<string, unknown>> {
    const input = call.input;
    const limit = this.options.outputLimitBytes;
    switch (call.name) {
      case "bash": {
        const command = stringField(input, "command");
        const r = await workspace.exec("/bin/bash", ["-c", command], {
          timeoutMs: this.options.timeoutMs,
          maxOutputBytes: limit,
          signal,
          onOutput,
        });
        // stdout gets three quarters of the budget, stderr the rest.
        const stdout = clip(r.stdout, Math.floor((limit * 3) / 4));
        const stderr = clip(r.stderr, limit - Buffer.byteLength(stdout));
        return {
          exitCode: r.exitCode,
          stdout,
          ...(stderr ? { stderr } : {}),
          ...(r.stdoutBytes > Buffer.byteLength(stdout) || r.stderrBytes > Buffer.byteLength(stderr)
            ? { truncated: true, stdoutBytes: r.stdoutBytes, stderrBytes: r.stderrBytes }
            : {}),
          ...(r.cancelled ? { cancelled: true } : {}),
        };
      }
      case "read_file": {
        const path = stringField(input, "path");
        const r = await workspace.readFile(path, limit, signal);
        const content = clip(Buffer.from(r.data).toString("utf8"), limit);
        return {
          path,
          content,
          totalSize: r.totalSize,
          ...(r.totalSize > Buffer.byteLength(content) ? { truncated: true } : {}),
        };
      }
      case "write_file": {
        const path = stringField(input, "path");
        const content = typeof input.content === "string" ? input.content : "";
        const bytesWritten = await workspace.writeFile(path, Buffer.from(content), signal);
        return { path, bytesWritten };
      }
      case "list_files": {
        const path = typeof input.path === "string" && input.path !== "" ? input.path : ".";
        const r = await workspace.listFiles(path, {
          recursive: input.recursive === true,
          maxEntries: LIST_MAX_ENTRIES,
          signal,
        });
        return { path, entries: r.entries, ...(r.truncated ? { truncated: true } : {}) };
      }
      default:
        throw PlatformError.invalidArgument(`unknown tool "${call.name}"`);
    }
  }

  /** Last line of defence: a result larger than the limit is cut (and says so). */
  #cap(content: string): string {
    const limit = this.options.outputLimitBytes + 1024;
    if (Buffer.byteLength(content) <= limit) return content;
    return JSON.stringify({ truncated: true, head: clip(content, this.options.outputLimitBytes) });
  }
}

function failure(message: string): ToolResult {
  return { content: JSON.stringify({ error: message }), isError: true };
}

function stringField(input: Record<string, unknown>, field: string): string {
  const value = input[field];
  if (typeof value !== "string" || value === "")
    throw PlatformError.invalidArgument(`tool input "${field}" must be a non-empty string`);
  return value;
}

/** At most `bytes` bytes of UTF-8, cut on a character boundary. */
export function clip(text: string, bytes: number): string {
  const buf = Buffer.from(text);
  if (buf.length <= bytes) return text;
  return buf
    .subarray(0, Math.max(0, bytes))
    .toString("utf8")
    .replace(/\uFFFD$/, "");
}
