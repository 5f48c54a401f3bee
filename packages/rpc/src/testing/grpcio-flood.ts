import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The python3 that carries the distribution's python3-grpcio (scripts/setup.sh installs it). */
export const grpcioPython = "/usr/bin/python3";
const script = fileURLToPath(new URL("./grpcio_flood.py", import.meta.url));

export interface GrpcioFlood {
  /** host:port */
  target: string;
  /** "/pkg.Service/Method" */
  method: string;
  /** Encoded request messages; each is sent `rounds` times, all in flight at once on one channel. */
  requests: Uint8Array[];
  rounds: number;
  /** A call made on the same channel afterwards. */
  final: { method: string; request: Uint8Array };
}

export interface GrpcioFloodResult {
  /** Status code name (grpc.StatusCode) → calls. */
  codes: Record<string, number>;
  /** A message per code. */
  samples: Record<string, string>;
  /** Longest status message, in UTF-8 bytes. */
  max_message: number;
  /** Largest trailing metadata (keys + values, grpc-status-details-bin included), in bytes. */
  max_trailing: number;
  /** "OK" or "<CODE>: <message>". */
  final: string;
}

/** Whether the independent python peer can run here. */
export function hasGrpcio(): Promise<boolean> {
  if (!existsSync(grpcioPython)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const p = spawn(grpcioPython, ["-c", "import grpc"], { stdio: "ignore" });
    p.on("error", () => resolve(false));
    p.on("exit", (code) => resolve(code === 0));
  });
}

/** Runs the flood with python3-grpcio (gRPC C core) and returns what it saw. */
export function grpcioFlood(flood: GrpcioFlood): Promise<GrpcioFloodResult> {
  const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");
  const input = JSON.stringify({
    target: flood.target,
    method: flood.method,
    requests: flood.requests.map(b64),
    rounds: flood.rounds,
    final: { method: flood.final.method, request: b64(flood.final.request) },
  });
  return new Promise((resolve, reject) => {
    const p = spawn(grpcioPython, [script], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    p.stdout.on("data", (c: Buffer) => {
      out += c;
    });
    p.stderr.on("data", (c: Buffer) => {
      err += c;
    });
    p.on("error", reject);
    p.on("exit", (code) => {
      if (code !== 0) reject(new Error(`grpcio flood exited ${code}: ${err.slice(-2000)}`));
      else resolve(JSON.parse(out) as GrpcioFloodResult);
    });
    p.stdin.end(input);
  });
}
