import { ComputeReason, PlatformError } from "@platform/errors";
import type { NetworkPolicy } from "@platform/network-policy";
import type { ExecOptions, ExecResult, FileEntry, Sandboxes, SandboxGoneReason, Workspace } from "./ports.ts";
import type { Store } from "./store.ts";

/**
 * What happened to the session's sandbox under an owner, as the session's
 * log records it (a run publishes these; see the README's "Sandbox events").
 */
export type SandboxEvent =
  | { type: "sandbox_paused"; sandboxId: string }
  | { type: "sandbox_resumed"; sandboxId: string }
  | { type: "sandbox_replaced"; previousSandboxId: string; sandboxId: string; reason: SandboxGoneReason }
  | { type: "network_denied"; sandboxId: string; host: string; port: number; reason: string };

/** At most this many `network_denied` events per command (the first ones: they say why). */
const MAX_DENIALS_TOLD = 10;

export type SessionSandboxOptions = {
  /**
   * Ask compute for the sandbox's state before every use (a run: one
   * DescribeSandbox per tool call), so that a PAUSED sandbox is resumed and
   * a gone one replaced before the call, and both can be told. Without it
   * (users' file calls) the sandbox the session names is used as it is and
   * replaced only when compute answers that it cannot serve.
   */
  observe: boolean;
  /** Told of each pause seen, resume and replacement, and of connections refused during a command. */
  onEvent?: (event: SandboxEvent) => void;
  /** What a new sandbox of the session may reach (the agent's policy); absent: nothing. */
  networkPolicy?: NetworkPolicy;
  /** The image a new sandbox of the session runs on (the agent's); absent: compute's default. */
  image?: string;
};

/** The session fields an owner starts from. */
export type SandboxOwnerSession = { orgId: string; id: string; sandboxId?: string };

/**
 * The one owner of a session's sandbox for one run or one file call: it
 * creates the sandbox on first need, reuses the one the session names,
 * resumes it when PAUSED, and replaces it when compute says it is gone
 * (FAILED, DESTROYED, unknown): a new sandbox for the same tenant and
 * session, which compute mounts on the same workspace. The session row
 * records each new sandbox, so the next owner starts from it. Whoever
 * replaced a gone sandbox first wins: another owner's replacement is
 * adopted rather than a second one made, so a session does not collect
 * sandboxes.
 */
export class SessionSandbox implements Workspace {
  #id: string | undefined;

  constructor(
    private readonly store: Pick<Store, "getSession" | "setSandbox">,
    private readonly sandboxes: Sandboxes,
    private readonly session: SandboxOwnerSession,
    private readonly options: SessionSandboxOptions,
  ) {
    this.#id = session.sandboxId || undefined;
  }

  /** The sandbox last used (or the session's, before any use). */
  get sandboxId(): string | undefined {
    return this.#id;
  }

  exec(command: string, args: string[], options: ExecOptions): Promise<ExecResult> {
    if (!this.options.networkPolicy || !this.options.onEvent || !this.sandboxes.networkDenials)
      return this.use((id) => this.sandboxes.exec(id, command, args, options));
    return this.use(async (id) => {
      await this.#netPosition(id);
      try {
        return await this.sandboxes.exec(id, command, args, options);
      } finally {
        await this.#tellDenials(id);
      }
    });
  }

  /** Where the last look at each sandbox's network events ended. */
  #netCursor = new Map<string, string>();

  /** The first command on a sandbox: the position after what its log holds already (earlier runs' refusals are not told again). */
  async #netPosition(sandboxId: string): Promise<void> {
    if (this.#netCursor.has(sandboxId)) return;
    try {
      const list = this.sandboxes.networkDenials?.bind(this.sandboxes);
      if (list) this.#netCursor.set(sandboxId, (await list(sandboxId, "")).next);
    } catch {
      // Unknown yet: the next look starts from the first event.
    }
  }

  /**
   * The connections compute's egress proxy refused during the command, as
   * `network_denied` events (the first few), so the person sees why it failed.
   */
  async #tellDenials(sandboxId: string): Promise<void> {
    const list = this.sandboxes.networkDenials?.bind(this.sandboxes);
    if (!list) return;
    try {
      const { denials, next } = await list(sandboxId, this.#netCursor.get(sandboxId) ?? "");
      this.#netCursor.set(sandboxId, next);
      for (const d of denials.slice(0, MAX_DENIALS_TOLD))
        this.#emit({ type: "network_denied", sandboxId, host: d.host, port: d.port, reason: d.reason });
    } catch {
      // The log of refusals is for people; the command's own result stands without it.
    }
  }

  readFile(path: string, maxBytes: number, signal: AbortSignal) {
    return this.use((id) => this.sandboxes.readFile(id, path, maxBytes, signal));
  }

  writeFile(path: string, data: Uint8Array, signal: AbortSignal): Promise<number> {
    return this.use((id) => this.sandboxes.writeFile(id, path, data, signal));
  }

  listFiles(
    path: string,
    options: { recursive: boolean; maxEntries: number; signal: AbortSignal },
  ): Promise<{ entries: FileEntry[]; truncated: boolean }> {
    return this.use((id) => this.sandboxes.listFiles(id, path, options));
  }

  /** Runs `fn` on the session's sandbox; once more on a new one when compute says that sandbox cannot serve. */
  async use<T>(fn: (sandboxId: string) => Promise<T>): Promise<T> {
    const id = await this.#ready();
    try {
      return await fn(id);
    } catch (err) {
      if (!gone(err)) throw err;
      const fresh = await this.#replace(id, await this.#why(id, err));
      try {
        return await fn(fresh);
      } catch (again) {
        // A sandbox created a moment ago that cannot serve: compute is in trouble, not the caller.
        if (gone(again))
          throw PlatformError.unavailable(
            `the session's sandbox could not serve the call: ${(again as Error).message}`,
          );
        throw again;
      }
    }
  }

  async #ready(): Promise<string> {
    const id = this.#id;
    if (!id) return this.#replace(undefined, "not_found");
    if (!this.options.observe) return id;
    const state = await this.sandboxes.state(id);
    if (state.kind === "running") return id;
    if (state.kind === "gone") return this.#replace(id, state.why);
    // Compute would resume it on the call too; resuming here first makes the resume a fact the log can state.
    this.#emit({ type: "sandbox_paused", sandboxId: id });
    if (await this.sandboxes.resume(id)) {
      this.#emit({ type: "sandbox_resumed", sandboxId: id });
      return id;
    }
    const after = await this.sandboxes.state(id);
    return this.#replace(id, after.kind === "gone" ? after.why : "failed");
  }

  /**
   * The sandbox after `stale` (none: the session's first): the session's
   * current one when another owner already replaced it, else a new one.
   */
  async #replace(stale: string | undefined, why: SandboxGoneReason): Promise<string> {
    const now = await this.store.getSession(this.session.orgId, this.session.id);
    if (!now) throw PlatformError.notFound("session not found");
    let next: string;
    if (now.sandboxId && now.sandboxId !== stale && (await this.sandboxes.state(now.sandboxId)).kind !== "gone") {
      next = now.sandboxId;
    } else {
      next = await this.sandboxes.create(
        this.session.orgId,
        this.session.id,
        this.options.networkPolicy || this.options.image
          ? {
              ...(this.options.networkPolicy ? { networkPolicy: this.options.networkPolicy } : {}),
              ...(this.options.image ? { image: this.options.image } : {}),
            }
          : undefined,
      );
      await this.store.setSandbox(this.session.id, next);
    }
    this.#id = next;
    if (stale) this.#emit({ type: "sandbox_replaced", previousSandboxId: stale, sandboxId: next, reason: why });
    return next;
  }

  /** Why compute refused a call on the sandbox (asked only when someone is told). */
  async #why(id: string, err: unknown): Promise<SandboxGoneReason> {
    if (!this.options.onEvent || (err as PlatformError).reason === ComputeReason.sandboxNotFound) return "not_found";
    const state = await this.sandboxes.state(id).catch(() => undefined);
    return state?.kind === "gone" ? state.why : "failed";
  }

  #emit(event: SandboxEvent): void {
    this.options.onEvent?.(event);
  }
}

/** Compute's word that the sandbox itself is unknown, FAILED or DESTROYED (not the file). */
function gone(err: unknown): boolean {
  return (
    err instanceof PlatformError &&
    (err.reason === ComputeReason.sandboxNotFound || err.reason === ComputeReason.sandboxNotRunnable)
  );
}
