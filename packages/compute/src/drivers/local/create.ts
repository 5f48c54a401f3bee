import * as fs from "node:fs";
import { PlatformError } from "@platform/errors";
import type { SandboxSpec } from "../../driver.ts";
import type { RootImage } from "./images/index.ts";
import type { Launcher } from "./launch.ts";
import type { Live } from "./live.ts";
import { SessionWorkspace } from "./session-workspace.ts";
import { WorkspaceImage } from "./workspace-image.ts";
import type { Workspaces } from "./workspaces.ts";

/** What creating a sandbox needs of the rest of the driver. */
export interface CreateDeps {
  dataDir: string;
  /** The size warm sandboxes' workspaces are made with: only a create asking for it adopts one. */
  defaultWorkspaceBytes: number;
  /** Whether the driver knows a sandbox of this id. */
  known(sandboxId: string): boolean;
  /** The driver knows it by its id from now on (before anything is made, so a second create is refused). */
  register(live: Live): void;
  /** Its provisioning failed: the driver forgets it. */
  forget(sandboxId: string): void;
  newLive(spec: SandboxSpec, uid?: number): Live;
  /** Takes a warm sandbox for spec if one of its image is ready (warm-sandboxes.ts). */
  adoptWarm(spec: SandboxSpec, ws: SessionWorkspace, root: RootImage | undefined): boolean;
  /** UNAVAILABLE once the driver is closing: nothing would end a sandbox started then. */
  refuseIfClosed(): void;
  workspaces: Pick<
    Workspaces,
    "withLock" | "provision" | "removeSandboxDir" | "removeDir" | "mountImage" | "markIfUnused" | "releaseLocked"
  >;
  launcher: Pick<Launcher<Live>, "createCgroup" | "armDeadline" | "start">;
}

/**
 * Makes spec's sandbox and starts it, under its session workspace's lock:
 * on the session's workspace if it has one, else from a warm sandbox, else
 * on a new workspace of sizeBytes. A failed provisioning keeps nothing of
 * what it made but a session workspace that served a sandbox before.
 */
export async function createSandbox(
  deps: CreateDeps,
  spec: SandboxSpec,
  root: RootImage | undefined,
  sizeBytes: number,
): Promise<void> {
  const ws = new SessionWorkspace(deps.dataDir, spec.tenantId, spec.sessionId);
  // One at a time per session: two creates at once must not both make its workspace.
  await deps.workspaces.withLock(ws.key, async () => {
    if (deps.known(spec.sandboxId)) throw PlatformError.alreadyExists(`sandbox ${spec.sandboxId} exists`);
    // The session had a sandbox: the new one mounts the same workspace (its size stays what it was made with).
    if (ws.exists()) return createOnWorkspace(deps, spec, ws, root);
    // Warm sandboxes carry a workspace of the default size; any other size is made for the spec.
    if (sizeBytes === deps.defaultWorkspaceBytes && deps.adoptWarm(spec, ws, root)) return;
    const live = deps.newLive(spec);
    live.rootImage = root;
    live.workspace = ws;
    deps.register(live);
    try {
      live.layout.prepare(spec, live.uid);
      ws.prepare(live.uid);
      await deps.workspaces.provision(live, ws.image, sizeBytes);
      deps.refuseIfClosed();
      deps.launcher.createCgroup(live);
    } catch (err) {
      deps.forget(spec.sandboxId);
      // It never ran: nothing of it is kept (no mount, no loop device, no image).
      await deps.workspaces.removeSandboxDir(live.layout);
      await deps.workspaces.removeDir(ws.dir);
      throw err instanceof PlatformError ? err : PlatformError.internal("sandbox provisioning failed", err);
    }
    deps.launcher.armDeadline(live);
    deps.launcher.start(live);
  });
}

/** A new sandbox on the session's existing workspace: no longer marked for collection, mounted, its uid kept. */
async function createOnWorkspace(
  deps: CreateDeps,
  spec: SandboxSpec,
  ws: SessionWorkspace,
  root?: RootImage,
): Promise<void> {
  const image = new WorkspaceImage(ws.image);
  ws.clearMark();
  let dir: string;
  try {
    dir = await deps.workspaces.mountImage(image);
  } catch (err) {
    deps.workspaces.markIfUnused(ws);
    throw PlatformError.internal("sandbox provisioning failed: the session's workspace could not be mounted", err);
  }
  // Its files belong to the uid the session's first sandbox ran as.
  const live = deps.newLive(spec, ws.owner()?.uid ?? fs.statSync(dir).uid);
  live.rootImage = root;
  live.workspace = ws;
  live.image = image;
  live.workspaceDir = dir;
  deps.register(live);
  try {
    deps.refuseIfClosed();
    live.layout.prepare(spec, live.uid);
    deps.launcher.createCgroup(live);
  } catch (err) {
    deps.forget(spec.sandboxId);
    await deps.workspaces.removeSandboxDir(live.layout);
    await deps.workspaces.releaseLocked(live);
    throw err instanceof PlatformError ? err : PlatformError.internal("sandbox provisioning failed", err);
  }
  deps.launcher.armDeadline(live);
  deps.launcher.start(live);
}
