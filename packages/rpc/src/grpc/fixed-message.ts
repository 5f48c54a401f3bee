import { type DescMessage, type Message, toBinary } from "@bufbuild/protobuf";

/** The encodings of fixed messages (fixedMessage), by message. */
const encodings = new WeakMap<Message, Uint8Array>();

/**
 * `message`, frozen with every object and list it holds, and encoded once:
 * a handler that answers many calls with the same reply (identity's
 * VerifyToken for a cached session: the same caller again and again) hands
 * back the same object, and the direct gRPC path writes its encoding
 * without encoding it again (toBinary's walk and two ArrayBuffers, ~5 us a
 * VerifyToken call here; packages/bench/ANALYSIS.md). Frozen, so the bytes
 * stay the message's. A message holding bytes (a typed array cannot be
 * frozen) is returned as it is, not fixed.
 */
export function fixedMessage<T extends Message>(schema: DescMessage, message: T): T {
  if (message.$typeName !== schema.typeName || !freezable(message)) return message;
  deepFreeze(message);
  encodings.set(message, toBinary(schema, message));
  return message;
}

/** The encoding of `message` if it is a fixed message of `schema`. */
export function fixedEncodingOf(schema: DescMessage, message: Message): Uint8Array | undefined {
  const bytes = encodings.get(message);
  return bytes !== undefined && message.$typeName === schema.typeName ? bytes : undefined;
}

function freezable(value: unknown): boolean {
  if (value === null || typeof value !== "object") return true;
  if (ArrayBuffer.isView(value)) return false;
  return Object.values(value).every(freezable);
}

function deepFreeze(value: unknown): void {
  if (value === null || typeof value !== "object" || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
}
