import http2 from "node:http2";
import {
  create,
  type DescMessage,
  type DescMethodServerStreaming,
  type DescMethodUnary,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";

/**
 * A minimal gRPC client for load generation (the role ghz or h2load play
 * elsewhere): unary and server-streaming calls over one raw node:http2 session, the 5-byte
 * length-prefixed envelope, protobuf via @bufbuild/protobuf, no compression,
 * no interceptors. connect-node's client costs about as much CPU per call as
 * the server under test, so with it a throughput figure measures the client.
 * Still a real client: every response's grpc-status is checked and its
 * message decoded, so a failing call rejects and is counted.
 */
export class GrpcLoadClient {
  readonly #session: http2.ClientHttp2Session;
  #error: Error | undefined;

  /**
   * `tls`: the client certificate and CA for an https:// (mutual TLS) internal port.
   * `wideWindows`: the flow-control windows of the platform's own clients
   * (1 MiB a stream, 8 MiB the connection, @platform/rpc's http2-windows.ts)
   * instead of HTTP/2's 64 KiB, for streams that carry megabytes.
   */
  constructor(baseUrl: string, tls?: { ca: Buffer; cert: Buffer; key: Buffer }, options?: { wideWindows?: boolean }) {
    this.#session = http2.connect(baseUrl, {
      ...(tls ? { ca: tls.ca, cert: tls.cert, key: tls.key } : {}),
      ...(options?.wideWindows ? { settings: { initialWindowSize: 1 << 20 } } : {}),
    });
    if (options?.wideWindows) this.#session.once("connect", (s) => s.setLocalWindowSize(8 << 20));
    this.#session.on("error", (err) => {
      this.#error = err;
    });
  }

  #request<I extends DescMessage>(
    method: DescMethodUnary<I, DescMessage> | DescMethodServerStreaming<I, DescMessage>,
    input: MessageInitShape<I>,
  ): http2.ClientHttp2Stream {
    const body = toBinary(method.input, create(method.input, input));
    const frame = Buffer.allocUnsafe(5 + body.length);
    frame[0] = 0;
    frame.writeUInt32BE(body.length, 1);
    frame.set(body, 5);
    const stream = this.#session.request({
      ":method": "POST",
      ":path": `/${method.parent.typeName}/${method.name}`,
      "content-type": "application/grpc+proto",
      te: "trailers",
    });
    stream.end(frame);
    return stream;
  }

  unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    input: MessageInitShape<I>,
  ): Promise<MessageShape<O>> {
    if (this.#error) return Promise.reject(this.#error);
    const stream = this.#request(method, input);
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let status: string | undefined;
      let message = "";
      const take = (h: http2.IncomingHttpHeaders) => {
        if (h["grpc-status"] !== undefined) {
          status = String(h["grpc-status"]);
          message = decodeURIComponent(String(h["grpc-message"] ?? ""));
        }
      };
      stream.on("response", (h) => {
        if (h[":status"] !== 200) reject(new Error(`HTTP ${h[":status"]} from ${method.name}`));
        take(h);
      });
      stream.on("trailers", take);
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("error", reject);
      stream.on("close", () => {
        if (status !== "0") return reject(new Error(`${method.name}: grpc-status ${status ?? "missing"} ${message}`));
        const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
        if (data.length < 5 || data[0] !== 0)
          return reject(new Error(`${method.name}: malformed or compressed response frame`));
        const length = data.readUInt32BE(1);
        if (data.length !== 5 + length)
          return reject(new Error(`${method.name}: response of ${data.length - 5} bytes, frame says ${length}`));
        try {
          resolve(fromBinary(method.output, data.subarray(5)));
        } catch (err) {
          reject(err);
        }
      });
    });
  }

  /**
   * A server-streaming call: each response message decoded and handed to
   * `onMessage` as its frame completes; resolves at an OK status, rejects
   * on any other (or a malformed frame).
   */
  serverStream<I extends DescMessage, O extends DescMessage>(
    method: DescMethodServerStreaming<I, O>,
    input: MessageInitShape<I>,
    onMessage: (message: MessageShape<O>) => void,
  ): Promise<void> {
    if (this.#error) return Promise.reject(this.#error);
    const stream = this.#request(method, input);
    return new Promise((resolve, reject) => {
      let status: string | undefined;
      let message = "";
      let failed: Error | undefined;
      const take = (h: http2.IncomingHttpHeaders) => {
        if (h["grpc-status"] !== undefined) {
          status = String(h["grpc-status"]);
          message = decodeURIComponent(String(h["grpc-message"] ?? ""));
        }
      };
      // Unparsed bytes: chunks joined only once a whole frame is there.
      let chunks: Buffer[] = [];
      let buffered = 0;
      let need = 5;
      stream.on("response", (h) => {
        if (h[":status"] !== 200) failed ??= new Error(`HTTP ${h[":status"]} from ${method.name}`);
        take(h);
      });
      stream.on("trailers", take);
      stream.on("data", (c: Buffer) => {
        chunks.push(c);
        buffered += c.length;
        while (buffered >= need && !failed) {
          let data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
          chunks = [data];
          if (data[0] !== 0) {
            failed = new Error(`${method.name}: compressed or malformed response frame`);
            break;
          }
          const length = data.readUInt32BE(1);
          need = 5 + length;
          if (buffered < need) break;
          try {
            onMessage(fromBinary(method.output, data.subarray(5, need)));
          } catch (err) {
            failed = err as Error;
          }
          data = data.subarray(need);
          chunks = data.length ? [data] : [];
          buffered = data.length;
          need = 5;
        }
      });
      stream.on("error", reject);
      stream.on("close", () => {
        if (failed) return reject(failed);
        if (status !== "0") return reject(new Error(`${method.name}: grpc-status ${status ?? "missing"} ${message}`));
        if (buffered !== 0) return reject(new Error(`${method.name}: ${buffered} bytes after the last message`));
        resolve();
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#session.close(() => resolve()));
  }
}
