import { timestampDate } from "@bufbuild/protobuf/wkt";
import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { Code } from "@platform/errors";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import type { WorkspaceEntry, WorkspaceFiles } from "../domain/ports.ts";
import { computeCall } from "./compute-call.ts";

/** Compute's answers about a file call that the caller should see as they are (its path rules, missing files, a full disk). */
const RELAYED = new Set([
  Code.InvalidArgument,
  Code.NotFound,
  Code.PermissionDenied,
  Code.ResourceExhausted,
  Code.FailedPrecondition,
  Code.DeadlineExceeded,
  Code.Canceled,
]);
const relay = <T>(rpc: string, fn: () => Promise<T>) => computeCall(rpc, fn, RELAYED);

/** Workspace files over compute's gRPC `compute.v1.ComputeService`. */
export class ComputeWorkspaceFiles implements WorkspaceFiles {
  readonly #client: Client<typeof ComputeService>;

  constructor(transport: Transport) {
    this.#client = createClient(ComputeService, transport);
  }

  async list(
    sandboxId: string,
    path: string,
    options: { recursive: boolean; maxEntries: number; signal: AbortSignal },
  ) {
    const res = await relay("ListFiles", () =>
      this.#client.listFiles(
        { sandboxId, path, recursive: options.recursive, maxEntries: options.maxEntries },
        { signal: options.signal },
      ),
    );
    const entries: WorkspaceEntry[] = res.entries.map((e) => ({
      path: e.path,
      size: Number(e.size),
      isDir: e.isDir,
      mode: e.mode,
      modifiedAt: e.modifiedAt ? timestampDate(e.modifiedAt) : undefined,
    }));
    return { entries, truncated: res.truncated };
  }

  async read(sandboxId: string, path: string, options: { offset: number; maxBytes: number; signal: AbortSignal }) {
    const res = await relay("ReadFile", () =>
      this.#client.readFile(
        { sandboxId, path, offset: BigInt(options.offset), maxBytes: BigInt(options.maxBytes) },
        { signal: options.signal },
      ),
    );
    return { data: res.data, totalSize: Number(res.totalSize), eof: res.eof };
  }

  async write(
    sandboxId: string,
    path: string,
    data: Uint8Array,
    options: { append: boolean; mode: number; signal: AbortSignal },
  ): Promise<number> {
    const res = await relay("WriteFile", () =>
      this.#client.writeFile(
        { sandboxId, path, data, append: options.append, mode: options.mode },
        { signal: options.signal },
      ),
    );
    return Number(res.bytesWritten);
  }
}
