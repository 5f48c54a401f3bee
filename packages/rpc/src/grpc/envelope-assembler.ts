import { Code, ConnectError } from "@connectrpc/connect";

/**
 * The one enveloped gRPC message of a unary request or answer, put together
 * from the pieces it arrives in: once the 5-byte prefix is in, one buffer of
 * the message's size is allocated and each piece is copied into it as it
 * comes, so the pieces themselves die young (held until the end, a 16 MiB
 * message's frames outlived a few young-generation collections, and V8
 * then needed a full mark-compact to free them).
 */
export class EnvelopeAssembler {
  #head: Buffer[] = [];
  #headBytes = 0;
  #body: Buffer | undefined;
  #filled = 0;
  #size = 0;

  constructor(
    private readonly limit: number,
    private readonly what: "input" | "output",
  ) {}

  push(chunk: Buffer): void {
    this.#size += chunk.length;
    if (this.#size > this.limit + 5) this.#tooLarge();
    if (!this.#body) {
      this.#head.push(chunk);
      this.#headBytes += chunk.length;
      if (this.#headBytes < 5) return;
      const first = this.#head.length === 1 ? chunk : Buffer.concat(this.#head);
      this.#head = [];
      const length = first.readUInt32BE(1);
      if (length > this.limit) this.#tooLarge();
      this.#body = Buffer.allocUnsafe(Math.max(first.length, 5 + length));
      first.copy(this.#body);
      this.#filled = first.length;
      return;
    }
    if (this.#filled + chunk.length > this.#body.length) {
      // More than the prefix said: an extra message, told apart below.
      this.#body = Buffer.concat([this.#body.subarray(0, this.#filled), chunk]);
    } else this.#body.set(chunk, this.#filled);
    this.#filled += chunk.length;
  }

  /** The message's bytes (without the prefix), or the protocol error the pieces make. */
  message(): Buffer {
    const body = this.#body;
    if (!body) {
      if (this.what === "input")
        throw new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented);
      throw new ConnectError("protocol error: premature end of stream", Code.InvalidArgument);
    }
    if ((body[0]! & 1) === 1) {
      throw new ConnectError("protocol error: received compressed message without grpc-encoding", Code.Internal);
    }
    const length = body.readUInt32BE(1);
    if (this.#filled !== 5 + length) {
      throw new ConnectError(
        this.#filled < 5 + length
          ? "protocol error: premature end of stream"
          : `protocol error: received extra ${this.what} message for unary method`,
        this.#filled < 5 + length ? Code.InvalidArgument : Code.Unimplemented,
      );
    }
    return body.subarray(5, this.#filled);
  }

  /** Whether any byte came. */
  get empty(): boolean {
    return this.#size === 0;
  }

  #tooLarge(): never {
    throw new ConnectError(`message size is larger than configured readMaxBytes ${this.limit}`, Code.ResourceExhausted);
  }
}
