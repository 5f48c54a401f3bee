import { ComputeReason, PlatformError } from "@platform/errors";
import type { AuthContext, Session } from "./model.ts";
import type { Sandboxes, WorkspaceEntry, WorkspaceFiles } from "./ports.ts";
import { SessionSandbox } from "./session-sandbox.ts";
import type { Store } from "./store.ts";
import { requireUuid } from "./validate.ts";
import { cleanSessionFilePath, cleanSessionPath } from "./workspace-path.ts";

/** The specification's limit of data per ReadFile or WriteFile call. */
export const FILE_CHUNK_MAX = 16 * 1024 * 1024;
const LIST_DEFAULT = 1000;
const LIST_MAX = 10_000;

/**
 * Users' files in and out of a session's workspace, without the model.
 * The session is the caller's org's (else 404, as for every session call);
 * the path is checked before compute is asked. The workspace is reached
 * through the session's sandbox with the tool loop's owner logic
 * (SessionSandbox): the one the session has, or a new one for the same
 * tenant and session (compute mounts the same workspace) when it has none or
 * its sandbox can no longer serve (max_runtime, destroyed, lost with a
 * restart). File calls write nothing to the session's log (its numbering
 * belongs to the run holding the session), so a replacement made here is
 * not recorded as an event. Runs are not waited
 * for: a file call during a run sees the workspace as the run's commands
 * leave it at that moment.
 */
export class SessionFiles {
  constructor(
    private readonly store: Store,
    private readonly sandboxes: Sandboxes,
    private readonly files: WorkspaceFiles,
  ) {}

  async list(
    auth: AuthContext,
    id: string,
    input: { path: string; recursive: boolean; limit: number },
    signal: AbortSignal,
  ): Promise<{ entries: WorkspaceEntry[]; truncated: boolean }> {
    const sessionId = requireUuid("id", id);
    const path = cleanSessionPath(input.path);
    if (!Number.isInteger(input.limit) || input.limit < 0 || input.limit > LIST_MAX)
      throw PlatformError.invalidArgument(`limit must be from 0 to ${LIST_MAX}`);
    const maxEntries = input.limit || LIST_DEFAULT;
    return this.#withSandbox(auth, sessionId, (sandboxId) =>
      this.files.list(sandboxId, path, { recursive: input.recursive, maxEntries, signal }),
    );
  }

  async read(
    auth: AuthContext,
    id: string,
    input: { path: string; offset: number; maxBytes: number },
    signal: AbortSignal,
  ) {
    const sessionId = requireUuid("id", id);
    const path = cleanSessionFilePath(input.path);
    if (!Number.isSafeInteger(input.offset) || input.offset < 0)
      throw PlatformError.invalidArgument("offset must be 0 or more");
    if (!Number.isSafeInteger(input.maxBytes) || input.maxBytes < 0)
      throw PlatformError.invalidArgument("maxBytes must be 0 or more");
    const maxBytes = input.maxBytes === 0 || input.maxBytes > FILE_CHUNK_MAX ? FILE_CHUNK_MAX : input.maxBytes;
    return this.#withSandbox(auth, sessionId, (sandboxId) =>
      this.files.read(sandboxId, path, { offset: input.offset, maxBytes, signal }),
    );
  }

  async write(
    auth: AuthContext,
    id: string,
    input: { path: string; data: Uint8Array; append: boolean; mode: number },
    signal: AbortSignal,
  ): Promise<number> {
    const sessionId = requireUuid("id", id);
    const path = cleanSessionFilePath(input.path);
    if (input.data.length > FILE_CHUNK_MAX) {
      throw PlatformError.invalidArgument(
        `data is ${input.data.length} bytes; at most ${FILE_CHUNK_MAX} per call (send the rest with append)`,
        ComputeReason.payloadTooLarge,
      );
    }
    if (!Number.isInteger(input.mode) || input.mode < 0 || input.mode > 0o7777)
      throw PlatformError.invalidArgument("mode must be permission bits (at most 07777)");
    return this.#withSandbox(auth, sessionId, (sandboxId) =>
      this.files.write(sandboxId, path, input.data, { append: input.append, mode: input.mode, signal }),
    );
  }

  /** Runs `fn` on the session's sandbox, owned for this call the way a run owns it (SessionSandbox). */
  async #withSandbox<T>(auth: AuthContext, sessionId: string, fn: (sandboxId: string) => Promise<T>): Promise<T> {
    const session = await this.#session(auth, sessionId);
    // A sandbox made here (the session's first, or a replacement) gets the agent's network policy, as a run's would.
    const agent = await this.store.getAgent(auth.orgId, session.agentId);
    const networkPolicy = agent?.networkPolicy;
    return new SessionSandbox(this.store, this.sandboxes, session, {
      observe: false,
      ...(networkPolicy ? { networkPolicy } : {}),
      ...(agent?.image ? { image: agent.image } : {}),
    }).use(fn);
  }

  async #session(auth: AuthContext, sessionId: string): Promise<Session> {
    const session = await this.store.getSession(auth.orgId, sessionId);
    if (!session) throw PlatformError.notFound("session not found");
    return session;
  }
}
