import type { ServiceImpl } from "@connectrpc/connect";
import type { ComputePort } from "./compute-port.ts";
import { Code, PlatformError } from "@platform/errors";
import type { Filesystem } from "@platform/gen/e2b/filesystem/filesystem_pb";
import { envdSandbox } from "./envd-access.ts";
import { HOME, sandboxPath } from "./paths.ts";
import type { SandboxRecords } from "./records.ts";
import { notFound, WorkspaceOps } from "./workspace-ops.ts";

const NO_WATCH =
  "watching directories is not served by this platform: compute has no file events (poll files.list instead)";

/** envd's filesystem.Filesystem over compute's ListFiles and ExecCommand (README: what is served). */
export function filesystemImpl(records: SandboxRecords, compute: ComputePort): ServiceImpl<typeof Filesystem> {
  const ops = new WorkspaceOps(compute);
  return {
    async stat(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      return { entry: await ops.stat(sb.sandboxId, req.path) };
    },
    async listDir(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const entry = await ops.stat(sb.sandboxId, req.path);
      if (entry.type !== 2)
        throw new PlatformError(Code.InvalidArgument, "invalid_argument", `path is not a directory: ${entry.path}`);
      return { entries: await ops.list(sb.sandboxId, req.path, req.depth || 1) };
    },
    async makeDir(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const abs = sandboxPath(req.path);
      if (await ops.exists(sb.sandboxId, abs))
        throw new PlatformError(Code.AlreadyExists, "already_exists", `directory already exists: ${abs}`);
      await ops.run(sb.sandboxId, "mkdir", ["-p", "--", abs]);
      return { entry: await ops.stat(sb.sandboxId, abs) };
    },
    async remove(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const abs = sandboxPath(req.path);
      if (abs === HOME)
        throw new PlatformError(Code.InvalidArgument, "invalid_argument", "the workspace root cannot be removed");
      if (!(await ops.exists(sb.sandboxId, abs))) throw notFound(abs);
      await ops.run(sb.sandboxId, "rm", ["-rf", "--", abs]);
      return {};
    },
    async move(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const from = sandboxPath(req.source);
      const to = sandboxPath(req.destination);
      if (from === HOME)
        throw new PlatformError(Code.InvalidArgument, "invalid_argument", "the workspace root cannot be moved");
      if (!(await ops.exists(sb.sandboxId, from))) throw notFound(from);
      await ops.run(sb.sandboxId, "mv", ["-T", "--", from, to]);
      return { entry: await ops.stat(sb.sandboxId, to) };
    },
    // biome-ignore lint/correctness/useYield: refuses before streaming
    async *watchDir(_req, ctx) {
      envdSandbox(records, ctx.requestHeader);
      throw new PlatformError(Code.Unimplemented, "unimplemented", NO_WATCH);
    },
    async createWatcher(_req, ctx) {
      envdSandbox(records, ctx.requestHeader);
      throw new PlatformError(Code.Unimplemented, "unimplemented", NO_WATCH);
    },
    async getWatcherEvents(_req, ctx) {
      envdSandbox(records, ctx.requestHeader);
      throw new PlatformError(Code.Unimplemented, "unimplemented", NO_WATCH);
    },
    async removeWatcher(_req, ctx) {
      envdSandbox(records, ctx.requestHeader);
      throw new PlatformError(Code.Unimplemented, "unimplemented", NO_WATCH);
    },
  };
}
