import { type DescMethod, getOption, hasOption, type Message } from "@bufbuild/protobuf";
import { last_message } from "@platform/gen/platform/api/v1/options_pb";

/** Whether a streamed message is one its contract declares last. */
export type IsLast = (message: Message) => boolean;

/**
 * The test of a server stream's `(platform.api.v1.last_message)`: true for
 * a message that sets one of the named oneof variants. Undefined when the
 * method names none. A name that is no oneof variant of the streamed
 * message, or the option on another kind of method, is a mistake of the
 * contract: it throws when the server is made, not on a call.
 */
export function lastMessageOf(method: DescMethod): IsLast | undefined {
  if (!hasOption(method, last_message)) return undefined;
  const names = getOption(method, last_message);
  if (names.length === 0) return undefined;
  const where = `${method.parent.typeName}.${method.name}`;
  if (method.methodKind !== "server_streaming") throw new Error(`last_message on ${where}, not a server stream`);
  const variants = names.map((name) => {
    const field = method.output.fields.find((f) => f.name === name);
    if (!field?.oneof)
      throw new Error(`last_message "${name}" of ${where} is no oneof variant of ${method.output.typeName}`);
    return { oneof: field.oneof.localName, variant: field.localName };
  });
  return (message) => {
    const m = message as unknown as Record<string, { case?: string } | undefined>;
    for (const v of variants) if (m[v.oneof]?.case === v.variant) return true;
    return false;
  };
}
