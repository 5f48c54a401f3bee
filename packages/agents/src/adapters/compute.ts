import { type Client, Code as ConnectCode, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import { ComputeService, SandboxStatus } from "@platform/gen/compute/v1/compute_pb";
import type { NetworkPolicy } from "@platform/network-policy";
import type { ExecOptions, ExecResult, FileEntry, NetworkDenial, Sandboxes, SandboxState } from "../domain/ports.ts";
import { computeCall } from "./compute-call.ts";

/** Sandboxes over compute's gRPC `compute.v1.ComputeService`. */
export class ComputeSandboxes implements Sandboxes {
  readonly #client: Client<typeof ComputeService>;

  readonly #maxRuntimeMs: number | undefined;

  /** `maxRuntimeMs`: the sandboxes' max_runtime (AGENTS_SANDBOX_MAX_RUNTIME_MS); absent: compute's default. */
  constructor(transport: Transport, options: { maxRuntimeMs?: number } = {}) {
    this.#client = createClient(ComputeService, transport);
    this.#maxRuntimeMs = options.maxRuntimeMs;
  }

  async images(): Promise<{ names: string[]; anyImage: boolean }> {
    const res = await computeCall("ListImages", () => this.#client.listImages({}, { timeoutMs: 10_000 }));
    return { names: [...res.images.map((i) => i.name), ...(res.anyImage ? [] : ["host"])], anyImage: res.anyImage };
  }

  async create(
    tenantId: string,
    sessionId: string,
    options: { networkPolicy?: NetworkPolicy; image?: string } = {},
  ): Promise<string> {
    const ms = this.#maxRuntimeMs;
    const limits = ms
      ? { maxRuntime: { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 } }
      : undefined;
    const res = await computeCall("CreateSandbox", () =>
      this.#client.createSandbox(
        { tenantId, sessionId, limits, networkPolicy: options.networkPolicy, image: options.image ?? "" },
        { timeoutMs: 30_000 },
      ),
    );
    return res.sandboxId;
  }

  async networkDenials(sandboxId: string, after: string): Promise<{ denials: NetworkDenial[]; next: string }> {
    const denials: NetworkDenial[] = [];
    let token = after;
    // A few pages at most per tool call: a command refused thousands of times is told by its first refusals.
    for (let page = 0; page < 5; page++) {
      const res = await computeCall("ListNetworkEvents", () =>
        this.#client.listNetworkEvents({ sandboxId, pageSize: 500, pageToken: token }, { timeoutMs: 10_000 }),
      );
      for (const e of res.events)
        if (!e.allowed)
          denials.push({
            host: e.host,
            port: e.port,
            reason: e.reason,
            at: e.time ? new Date(Number(e.time.seconds) * 1000 + Math.floor(e.time.nanos / 1e6)) : new Date(0),
          });
      token = res.nextPageToken || token;
      if (res.events.length < 500) break;
    }
    return { denials, next: token };
  }

  async state(sandboxId: string): Promise<SandboxState> {
    try {
      const res = await this.#client.describeSandbox({ sandboxId }, { timeoutMs: 10_000 });
      if (res.status === SandboxStatus.FAILED) return { kind: "gone", why: "failed" };
      if (res.status === SandboxStatus.DESTROYED) return { kind: "gone", why: "destroyed" };
      if (res.status === SandboxStatus.PAUSED) return { kind: "paused" };
      return { kind: "running" };
    } catch (err) {
      // Unknown sandbox: replace it. Anything else (compute down) surfaces
      // through the tool call itself rather than here.
      if (ConnectError.from(err).code === ConnectCode.NotFound) return { kind: "gone", why: "not_found" };
      return { kind: "running" };
    }
  }

  async resume(sandboxId: string): Promise<boolean> {
    try {
      await this.#client.resumeSandbox({ sandboxId }, { timeoutMs: 60_000 });
      return true;
    } catch (err) {
      // Unknown, FAILED or DESTROYED meanwhile (a destroy racing the resume): the session needs a new one.
      const code = ConnectError.from(err).code;
      if (code === ConnectCode.NotFound || code === ConnectCode.FailedPrecondition) return false;
      return computeCall("ResumeSandbox", () => Promise.reject(err));
    }
  }

  async destroy(sandboxId: string): Promise<void> {
    try {
      await this.#client.destroySandbox({ sandboxId }, { timeoutMs: 30_000 });
    } catch (err) {
      if (ConnectError.from(err).code === ConnectCode.NotFound) return;
      const message = err instanceof Error ? err.message : String(err);
      throw new PlatformError(
        Code.Unavailable,
        "unavailable",
        `compute DestroySandbox failed: ${message}`,
        {},
        { cause: err },
      );
    }
  }

  async exec(sandboxId: string, command: string, args: string[], options: ExecOptions): Promise<ExecResult> {
    const stdout = new Collector(options.maxOutputBytes);
    const stderr = new Collector(options.maxOutputBytes);
    const seconds = Math.max(1, Math.ceil(options.timeoutMs / 1000));
    return computeCall("ExecCommand", async () => {
      const stream = this.#client.execCommand(
        { sandboxId, command, args, timeout: { seconds: BigInt(seconds), nanos: 0 } },
        { signal: options.signal },
      );
      for await (const event of stream) {
        switch (event.event.case) {
          case "stdout":
            stdout.add(event.event.value.data);
            options.onOutput?.("stdout", event.event.value.data);
            break;
          case "stderr":
            stderr.add(event.event.value.data);
            options.onOutput?.("stderr", event.event.value.data);
            break;
          case "completed": {
            const c = event.event.value;
            return {
              exitCode: c.exitCode,
              cancelled: c.cancelled,
              stdout: stdout.text(),
              stderr: stderr.text(),
              stdoutBytes: stdout.total,
              stderrBytes: stderr.total,
              usage: {
                cpuMs: Number(c.usage?.cpuMs ?? 0n),
                wallMs: c.wallTime ? Number(c.wallTime.seconds) * 1000 + Math.round(c.wallTime.nanos / 1e6) : 0,
              },
            };
          }
        }
      }
      throw PlatformError.internal("the command's stream ended without a completed event");
    });
  }

  async readFile(sandboxId: string, path: string, maxBytes: number, signal: AbortSignal) {
    const res = await computeCall("ReadFile", () =>
      this.#client.readFile({ sandboxId, path, maxBytes: BigInt(maxBytes) }, { signal }),
    );
    return { data: res.data, totalSize: Number(res.totalSize), eof: res.eof };
  }

  async writeFile(sandboxId: string, path: string, data: Uint8Array, signal: AbortSignal): Promise<number> {
    const res = await computeCall("WriteFile", () => this.#client.writeFile({ sandboxId, path, data }, { signal }));
    return Number(res.bytesWritten);
  }

  async listFiles(
    sandboxId: string,
    path: string,
    options: { recursive: boolean; maxEntries: number; signal: AbortSignal },
  ) {
    const res = await computeCall("ListFiles", () =>
      this.#client.listFiles(
        { sandboxId, path, recursive: options.recursive, maxEntries: options.maxEntries },
        { signal: options.signal },
      ),
    );
    const entries: FileEntry[] = res.entries.map((e) => ({ path: e.path, size: Number(e.size), isDir: e.isDir }));
    return { entries, truncated: res.truncated };
  }
}

/** Keeps the head of a byte stream up to a limit and counts the rest. */
class Collector {
  readonly #chunks: Uint8Array[] = [];
  #kept = 0;
  total = 0;
  constructor(private readonly limit: number) {}
  add(data: Uint8Array): void {
    this.total += data.length;
    if (this.#kept >= this.limit) return;
    const part = data.subarray(0, this.limit - this.#kept);
    this.#chunks.push(part);
    this.#kept += part.length;
  }
  text(): string {
    return Buffer.concat(this.#chunks).toString("utf8");
  }
}
