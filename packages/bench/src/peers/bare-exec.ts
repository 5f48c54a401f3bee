import { spawn } from "node:child_process";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { fromBinary } from "@bufbuild/protobuf";
import { ExecCommandRequestSchema } from "@platform/gen/compute/v1/compute_pb";
import type { ServiceTls } from "@platform/rpc";

/** protobuf varint of a length. */
function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

/**
 * The gRPC envelope and the ExecEvent fields before a stdout chunk of `size`
 * bytes: `ExecEvent{stdout: StdoutLine{data}}` is tag 2 (length-delimited),
 * the StdoutLine's length, tag 1, the data's length, then the data itself,
 * written as it came from the pipe.
 */
function stdoutHead(size: number): Buffer {
  const inner = [0x0a, ...varint(size)];
  const message = [0x12, ...varint(inner.length + size), ...inner];
  const head = Buffer.alloc(5 + message.length);
  head.writeUInt32BE(message.length + size, 1);
  head.set(message, 5);
  return head;
}

/** `ExecEvent{completed: ExecCompleted{exit_code}}` enveloped. */
function completed(exitCode: number): Buffer {
  const code = exitCode === 0 ? [] : [0x08, ...varint(exitCode >>> 0)];
  const message = [0x22, ...varint(code.length), ...code];
  const out = Buffer.alloc(5 + message.length);
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/**
 * The least a Node gRPC server can be that streams a command's stdout:
 * node:http2 with the same mutual TLS as compute's internal port, answering
 * ExecCommand by spawning the command on the host (no sandbox, no driver, no
 * helper) and writing each chunk of its pipe as one ExecEvent stdout message
 * (the chunk itself, not copied), waiting only when the stream's buffer is
 * full, then the completed event and grpc-status 0. The exec throughput
 * figure's floor: what Node's HTTP/2 over TLS, the same client and this
 * machine allow any server relaying a pipe. An empty command is answered
 * with the completed event at once: the floor of a server-streaming call's
 * round trip (the exec round trip figure's).
 */
export async function startBareExec(host: string, tls: ServiceTls): Promise<{ url: string; close(): Promise<void> }> {
  const server = http2.createSecureServer({
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
    requestCert: true,
    rejectUnauthorized: true,
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  server.on("stream", (stream) => {
    const body: Buffer[] = [];
    stream.on("data", (c: Buffer) => body.push(c));
    stream.on("error", () => {});
    stream.on("end", () => {
      if (stream.destroyed) return;
      const request = fromBinary(ExecCommandRequestSchema, Buffer.concat(body).subarray(5));
      stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      // No command: the completed event at once, the transport's floor for a server-streaming call.
      if (request.command === "") {
        stream.end(completed(0));
        return;
      }
      const child = spawn(request.command, request.args, { stdio: ["ignore", "pipe", "ignore"] });
      child.stdout.on("data", (chunk: Buffer) => {
        stream.write(stdoutHead(chunk.length));
        if (!stream.write(chunk)) {
          child.stdout.pause();
          stream.once("drain", () => child.stdout.resume());
        }
      });
      child.on("close", (code) => stream.end(completed(code ?? -1)));
      stream.once("close", () => child.kill("SIGKILL"));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sessions) s.destroy();
      }),
  };
}
