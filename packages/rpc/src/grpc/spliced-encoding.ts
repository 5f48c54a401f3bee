import { type DescField, type DescMessage, type Message, ScalarType, toBinary } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { fixedEncodingOf } from "./fixed-message.ts";

/** Bytes fields at least this large are referenced, not copied. */
export const SPLICE_MIN_BYTES = 64 * 1024;

// Nesting followed to find the large field (ExecEvent → StdoutLine → data is 2).
const MAX_DEPTH = 4;

/**
 * A message's protobuf encoding as `head` followed by `tail`, where `tail`
 * is the message's one large bytes field (≥ SPLICE_MIN_BYTES), the very
 * array the message holds. `toBinary` copies such a field ~4 times (its
 * writer's growth, two length-prefix shifts for two levels of nesting, the
 * final slice) and zero-fills twice its size, which was most of compute's
 * encoding cost for exec output. The bytes are exactly `toBinary`'s: the
 * field must be the last one `toBinary` writes at every level (highest
 * number among those set, no unknown fields after it), else undefined and
 * the caller encodes the usual way.
 *
 * With `anyOrder`, a large top-level bytes field that is not the last one
 * is spliced too, written after the others: protobuf parsers take fields
 * in any order (and a field written once has one value), so the decoded
 * message is the same, though the bytes are no longer toBinary's. File
 * data is such a field (ReadFileResponse.data is field 1 of 3).
 */
export interface SplicedEncoding {
  head: Uint8Array;
  tail: Uint8Array;
  /** head.length + tail.length. */
  length: number;
}

export interface SpliceOptions {
  /** A large top-level bytes field may be written out of field order (last). */
  anyOrder?: boolean;
}

export function spliceEncode(
  schema: DescMessage,
  message: Message,
  options: SpliceOptions = {},
): SplicedEncoding | undefined {
  if (!mayHoldBytes(schema)) return undefined;
  const found = splice(schema, message, 0, options.anyOrder === true);
  if (!found) return undefined;
  const head = concat(found.head);
  return { head, tail: found.tail, length: head.length + found.tail.length };
}

interface Found {
  head: Uint8Array[];
  tail: Uint8Array;
  length: number;
}

/**
 * A message as gRPC/Connect enveloped bytes (flags 0, big-endian length,
 * the encoding), in the pieces to write in order. A message ending in a
 * large bytes field is the envelope with the rest of its encoding, then
 * the field's own bytes; another large message is the 5-byte prefix, then
 * its encoding (no envelope copy); a small one is one piece (one DATA frame).
 */
export function encodeEnveloped(schema: DescMessage, message: Message, options: SpliceOptions = {}): Uint8Array[] {
  const fixed = fixedEncodingOf(schema, message);
  if (fixed !== undefined) return [envelopeHead(fixed.length, fixed)];
  const spliced = spliceEncode(schema, message, options);
  if (spliced) return [envelopeHead(spliced.length, spliced.head), spliced.tail];
  const body = toBinary(schema, message);
  if (body.length >= SPLICE_MIN_BYTES) return [envelopeHead(body.length), body];
  return [envelopeHead(body.length, body)];
}

/** Per message type: whether `splice` could find a bytes field in it (memo of bytesWithin at depth 0). */
const holdsBytes = new WeakMap<DescMessage, boolean>();

/**
 * Whether a message of `schema` may have a bytes field that `splice`
 * follows (a bytes field at this level, or in a singular message field
 * within MAX_DEPTH). Asked once per type: most replies (VerifyToken's) have
 * none, and looking for one took two reflect() walks of every reply before
 * toBinary's own, ~5 us a VerifyToken call (packages/bench/ANALYSIS.md).
 */
function mayHoldBytes(schema: DescMessage): boolean {
  let holds = holdsBytes.get(schema);
  if (holds === undefined) {
    holds = bytesWithin(schema, 0);
    holdsBytes.set(schema, holds);
  }
  return holds;
}

function bytesWithin(schema: DescMessage, depth: number): boolean {
  return schema.fields.some(
    (f) =>
      (f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES) ||
      (f.fieldKind === "message" && !f.delimitedEncoding && depth < MAX_DEPTH && bytesWithin(f.message, depth + 1)),
  );
}

function envelopeHead(length: number, start?: Uint8Array): Buffer {
  const head = Buffer.allocUnsafe(5 + (start?.length ?? 0));
  head[0] = 0;
  head.writeUInt32BE(length, 1);
  if (start) head.set(start, 5);
  return head;
}

function splice(schema: DescMessage, message: Message, depth: number, anyOrder = false): Found | undefined {
  const unknown = (message as { $unknown?: unknown[] }).$unknown;
  if (unknown !== undefined && unknown.length > 0) return undefined;
  const r = reflect(schema, message, false);
  let last: DescField | undefined;
  for (const f of r.sortedFields) if (r.isSet(f)) last = f;
  if (last === undefined) return undefined;
  if (anyOrder) {
    const large = r.sortedFields.find(
      (f) =>
        f.fieldKind === "scalar" &&
        f.scalar === ScalarType.BYTES &&
        r.isSet(f) &&
        (r.get(f) as Uint8Array).length >= SPLICE_MIN_BYTES,
    );
    if (large) last = large;
  }
  let inner: Found | undefined;
  if (last.fieldKind === "scalar" && last.scalar === ScalarType.BYTES) {
    const value = r.get(last) as Uint8Array;
    if (value.length < SPLICE_MIN_BYTES) return undefined;
    inner = { head: [], tail: value, length: value.length };
  } else if (last.fieldKind === "message" && !last.delimitedEncoding && depth < MAX_DEPTH) {
    inner = splice(last.message, (r.get(last) as { message: Message }).message, depth + 1);
  }
  if (!inner) return undefined;
  // The rest of this level: the same message without the field, encoded as usual (small).
  const rest = Object.assign(Object.create(Object.getPrototypeOf(message)) as object, message) as Message;
  reflect(schema, rest, false).clear(last);
  const restBytes = toBinary(schema, rest);
  const fieldHead = [...varint((last.number << 3) | 2), ...varint(inner.length)];
  const head = [restBytes, Uint8Array.from(fieldHead), ...inner.head];
  return { head, tail: inner.tail, length: restBytes.length + fieldHead.length + inner.length };
}

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
