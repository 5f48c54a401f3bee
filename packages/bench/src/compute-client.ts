import { randomUUID } from "node:crypto";
import { type Client, createClient } from "@connectrpc/connect";
import { computeTransport } from "@platform/agents";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import type { ServiceTls } from "@platform/rpc";
import { now } from "./stats.ts";

export type ComputeClient = Client<typeof ComputeService>;

/**
 * A client as agents makes one (its computeTransport: @platform/rpc's
 * createServiceTransport, ExecCommand's output read by rpc's direct stream
 * reader), with `tls`: the agents certificate, the only one compute answers.
 */
export function computeClient(baseUrl: string, tls: ServiceTls | undefined): ComputeClient {
  return createClient(ComputeService, computeTransport(baseUrl, tls));
}

export interface ExecTiming {
  firstByteNs: number;
  totalNs: number;
  bytes: number;
  exitCode: number;
}

/** Runs one exec to completion, timing the first stdout byte and the completed event from `t0`. */
export async function timedExec(
  client: ComputeClient,
  sandboxId: string,
  command: string,
  args: string[],
  t0 = now(),
  timeoutMs = 60_000,
): Promise<ExecTiming> {
  let first = Number.NaN;
  let bytes = 0;
  let exitCode = Number.NaN;
  // A stalled stream fails this sample instead of holding the whole figure.
  for await (const ev of client.execCommand({ sandboxId, command, args }, { signal: AbortSignal.timeout(timeoutMs) })) {
    if (ev.event.case === "stdout") {
      if (bytes === 0) first = Number(now() - t0);
      bytes += ev.event.value.data.length;
    } else if (ev.event.case === "completed") {
      exitCode = ev.event.value.exitCode;
    }
  }
  const totalNs = Number(now() - t0);
  if (exitCode !== 0) throw new Error(`${command} exited with ${exitCode} in the sandbox`);
  return { firstByteNs: first, totalNs, bytes, exitCode };
}

export async function createSandbox(client: ComputeClient, tenantId = randomUUID()): Promise<string> {
  const res = await client.createSandbox({ tenantId, sessionId: randomUUID() });
  return res.sandboxId;
}

/** A sandbox that has run one command (so it is READY). */
export async function readySandbox(client: ComputeClient): Promise<string> {
  const id = await createSandbox(client);
  await timedExec(client, id, "/bin/true", []);
  return id;
}
