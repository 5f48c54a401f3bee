import { spawn } from "node:child_process";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { ExecCommandRequestSchema, ExecEventSchema } from "@platform/gen/compute/v1/compute_pb";
import type { ServiceTls } from "@platform/rpc";
import { envelope, respondGrpcOk, startBareHttp2 } from "./bare-http2.ts";

/**
 * The gRPC envelope and the ExecEvent fields before a stdout chunk of `size`
 * bytes: `ExecEvent{stdout: StdoutLine{data}}` is tag 2 (length-delimited),
 * the StdoutLine's length, tag 1, the data's length, then the data itself,
 * written as it came from the pipe.
 */
function stdoutHead(size: number): Buffer {
  const inner = new BinaryWriter().tag(1, WireType.LengthDelimited).uint32(size).finish();
  const message = new BinaryWriter()
    .tag(2, WireType.LengthDelimited)
    .uint32(inner.length + size)
    .raw(inner)
    .finish();
  const head = Buffer.alloc(5 + message.length);
  head.writeUInt32BE(message.length + size, 1);
  head.set(message, 5);
  return head;
}

/** `ExecEvent{completed: ExecCompleted{exit_code}}` enveloped. */
function completed(exitCode: number): Buffer {
  const message = toBinary(
    ExecEventSchema,
    create(ExecEventSchema, { event: { case: "completed", value: { exitCode } } }),
  );
  return envelope(message);
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
  return startBareHttp2(host, tls, (stream) => {
    const body: Buffer[] = [];
    stream.on("data", (c: Buffer) => body.push(c));
    stream.on("error", () => {});
    stream.on("end", () => {
      if (stream.destroyed) return;
      const request = fromBinary(ExecCommandRequestSchema, Buffer.concat(body).subarray(5));
      respondGrpcOk(stream);
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
}
