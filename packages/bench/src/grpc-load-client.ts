import http2 from "node:http2";
import {
  create,
  type DescMessage,
  type DescMethodUnary,
  fromBinary,
  type MessageInitShape,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";

/**
 * A minimal gRPC client for load generation (the role ghz or h2load play
 * elsewhere): unary calls over one raw node:http2 session, the 5-byte
 * length-prefixed envelope, protobuf via @bufbuild/protobuf, no compression,
 * no interceptors. connect-node's client costs about as much CPU per call as
 * the server under test, so with it a throughput figure measures the client.
 * Still a real client: every response's grpc-status is checked and its
 * message decoded, so a failing call rejects and is counted.
 */
export class GrpcLoadClient {
  readonly #session: http2.ClientHttp2Session;
  #error: Error | undefined;

  /** `tls`: the client certificate and CA for an https:// (mutual TLS) internal port. */
  constructor(baseUrl: string, tls?: { ca: Buffer; cert: Buffer; key: Buffer }) {
    this.#session = http2.connect(baseUrl, tls ? { ca: tls.ca, cert: tls.cert, key: tls.key } : undefined);
    this.#session.on("error", (err) => {
      this.#error = err;
    });
  }

  unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    input: MessageInitShape<I>,
  ): Promise<MessageShape<O>> {
    if (this.#error) return Promise.reject(this.#error);
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

  close(): Promise<void> {
    return new Promise((resolve) => this.#session.close(() => resolve()));
  }
}
