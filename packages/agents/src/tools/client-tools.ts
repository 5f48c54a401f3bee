import { ajv, validatorOf } from "../domain/client-tools.ts";
import type { ClientTool } from "../domain/model.ts";
import type { ToolCall, ToolSpec } from "../providers/provider.ts";
import type { ToolResult } from "./toolbox.ts";

// An agent's client tools in a run (issue 20 item 4): offered to the model,
// each call's input validated against its tool's schema (compiled once by
// domain/client-tools.ts) before a client sees it.

/** An agent's client tools during a run: what the model is offered, and the check of a call's input. */
export class ClientToolset {
  readonly #tools: ReadonlyMap<string, ClientTool>;

  constructor(tools: readonly ClientTool[]) {
    this.#tools = new Map(tools.map((t) => [t.name, t]));
  }

  get specs(): ToolSpec[] {
    return [...this.#tools.values()].map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
    }));
  }

  has(name: string): boolean {
    return this.#tools.has(name);
  }

  /**
   * Undefined when `call`'s input matches its tool's schema; otherwise the
   * error result the model gets instead of the client seeing the call.
   */
  check(call: ToolCall): ToolResult | undefined {
    const tool = this.#tools.get(call.name);
    if (!tool) return { content: JSON.stringify({ error: `unknown tool "${call.name}"` }), isError: true };
    const validate = validatorOf(tool.inputSchema);
    if (validate(call.input)) return undefined;
    const reason = ajv().errorsText(validate.errors, { dataVar: "input" });
    return {
      content: JSON.stringify({
        error: `the input does not match the ${call.name} tool's input schema: ${reason.slice(0, 1000)}`,
      }),
      isError: true,
    };
  }
}

/**
 * The tool result of `call` when it is a client tool's call (or was
 * answered as one): the client's answer; without one, the input's schema
 * error (a call the client never saw), or an error saying no result came.
 * Undefined for any other call.
 */
export function clientResult(
  tools: ClientToolset,
  call: ToolCall,
  answer: { result?: ToolResult } | undefined,
): ToolResult | undefined {
  if (answer?.result) return answer.result;
  if (!tools.has(call.name)) return undefined;
  return (
    tools.check(call) ?? {
      content: JSON.stringify({ error: "the client gave no result for this call" }),
      isError: true,
    }
  );
}
