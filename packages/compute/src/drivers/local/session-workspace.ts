import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { DELETE_AFTER_KEY } from "../../driver.ts";
import { readJson, writeJson } from "./sandbox-layout.ts";
import { isUuid } from "@platform/errors";

/** Who a workspace belongs to, and the uid its files are owned by (every sandbox of the session runs as it). */
export interface WorkspaceOwner {
  tenantId: string;
  sessionId: string;
  uid: number;
}

/**
 * The workspace of one agent session (tenant_id + session_id), under
 * `<dataDir>/workspaces/<tenant>_<session>/`, root-only 0700:
 *   workspace.img      the ext4 image (see workspace-image.ts)
 *   owner.json         tenant, session and the uid owning its files
 *   annotations.json   {"compute.platform.io/delete-after": ISO time} while no sandbox uses it
 * It outlives the sandboxes that mount it: a new sandbox of the session
 * mounts the same image (files, modes, times), and clears the mark; GC
 * removes it only once the mark has passed.
 */
export class SessionWorkspace {
  readonly key: string;
  readonly dir: string;

  constructor(
    dataDir: string,
    readonly tenantId: string,
    readonly sessionId: string,
  ) {
    this.key = workspaceKey(tenantId, sessionId);
    this.dir = join(dataDir, "workspaces", this.key);
  }

  get image(): string {
    return join(this.dir, "workspace.img");
  }

  /** Whether the session has a workspace (its image exists). */
  exists(): boolean {
    return fs.existsSync(this.image);
  }

  /** Makes the directory (root-only) and records the owner; the image is made by WorkspaceImage. */
  prepare(uid: number): void {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(this.dir, 0o700);
    writeJson(join(this.dir, "owner.json"), {
      tenantId: this.tenantId,
      sessionId: this.sessionId,
      uid,
    } satisfies WorkspaceOwner);
  }

  owner(): WorkspaceOwner | undefined {
    return readJson<WorkspaceOwner>(join(this.dir, "owner.json"));
  }

  /** Marks it for collection (no sandbox uses it any more). */
  markDeleteAfter(when: Date): void {
    writeJson(join(this.dir, "annotations.json"), { [DELETE_AFTER_KEY]: when.toISOString() });
  }

  /** A sandbox of the session uses it again: no longer to be collected. */
  clearMark(): void {
    fs.rmSync(join(this.dir, "annotations.json"), { force: true });
  }

  deleteAfter(): Date | undefined {
    return deleteAfterOf(this.dir);
  }
}

/**
 * The directory name of a session's workspace: `<tenant>_<session>` for the
 * UUIDs the domain passes (lower-cased), a hash for anything else so no
 * input can name a path.
 */
export function workspaceKey(tenantId: string, sessionId: string): string {
  const t = tenantId.toLowerCase();
  const s = sessionId.toLowerCase();
  if (isUuid(t) && isUuid(s)) return `${t}_${s}`;
  return `h-${createHash("sha256").update(`${tenantId}\0${sessionId}`).digest("hex").slice(0, 40)}`;
}

/** Where the image of a session's workspace is (tests and diagnostics). */
export function workspaceImageOf(dataDir: string, tenantId: string, sessionId: string): string {
  return new SessionWorkspace(dataDir, tenantId, sessionId).image;
}

/** The delete-after mark of a sandbox or workspace directory, when it has a valid one. */
export function deleteAfterOf(dir: string): Date | undefined {
  const after = readJson<Record<string, string>>(join(dir, "annotations.json"))?.[DELETE_AFTER_KEY];
  const when = after ? Date.parse(after) : Number.NaN;
  return Number.isNaN(when) ? undefined : new Date(when);
}
