import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ComputePort, NetworkPolicy, SandboxStatus } from "./compute-port.ts";
import { Code, PlatformError } from "@platform/errors";
import { headersOf, readBody, sendJson } from "./http-util.ts";
import { HOME } from "./paths.ts";
import { ProcessTable } from "./processes.ts";
import { type E2bSandbox, newAccessToken, type SandboxRecords } from "./records.ts";

/** What the SDK is told envd is: 0.5.7 has every call served here (multipart and octet-stream uploads). */
export const ENVD_VERSION = "0.5.7";
/** E2B's default sandbox timeout, and the longest one (E2B's longest sandbox life). */
export const DEFAULT_TIMEOUT_S = 300;
export const MAX_TIMEOUT_S = 24 * 3600;
/** The one template served: the platform's sandbox image (SANDBOX_IMAGE). */
export const TEMPLATE = "base";

/** Who an API key (or a person's JWT) stands for: identity's answer. */
export interface Caller {
  orgId: string;
  userId: string;
  /** An API key's scopes; undefined for a person. */
  scopes?: string[];
}
export type ApiKeyVerifier = (credential: string) => Promise<Caller>;

const UNSERVED: [RegExp, string][] = [
  [
    /^\/(v\d\/)?templates/,
    "templates are not served by this platform: sandboxes run its one image (SANDBOX_IMAGE) as template 'base'; building templates from Dockerfiles needs an image builder it does not have",
  ],
  [
    /^\/sandboxes\/[^/]+\/snapshots$|^\/snapshots/,
    "snapshots are not served by this platform: a paused sandbox keeps its workspace (pause and connect), not a memory image",
  ],
  [/^\/sandboxes\/[^/]+\/fork$/, "fork is not served by this platform"],
  [
    /^\/sandboxes\/[^/]+\/network$/,
    "network updates are not served by this platform: a sandbox's egress follows the platform's network policy",
  ],
  [
    /^\/sandboxes\/[^/]+\/(metrics|logs)$|^\/v\d\/sandboxes\/[^/]+\/logs$/,
    "sandbox metrics and logs are not served by this platform (compute's DescribeSandbox has usage)",
  ],
  [/^\/volume/, "volumes are not served by this platform: a sandbox has one workspace, mounted at /home/user"],
  [/^\/secrets/, "secrets are not served by this platform"],
];

/** A part of the E2B API this platform does not serve: 501, unimplemented. */
function notServed(message: string): PlatformError {
  return new PlatformError(Code.Unimplemented, "unimplemented", message, {}, { httpStatus: 501 });
}

/** E2B's control-plane REST routes the SDK uses, over the compute domain. */
export class ControlPlane {
  constructor(
    private readonly compute: ComputePort,
    private readonly records: SandboxRecords,
    private readonly verify: ApiKeyVerifier,
  ) {}

  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const path = url.pathname.replace(/\/+$/, "");
    for (const [re, message] of UNSERVED) {
      if (re.test(path)) throw notServed(message);
    }
    const caller = await this.#authenticate(req);
    const method = req.method ?? "GET";
    let m: RegExpMatchArray | null;
    if (method === "POST" && (path === "/v2/sandboxes" || path === "/sandboxes"))
      return sendJson(res, 201, await this.create(caller, await jsonBody(req)));
    if (method === "GET" && (path === "/v2/sandboxes" || path === "/sandboxes"))
      return sendJson(res, 200, await this.list(caller, url.searchParams));
    if ((m = path.match(/^\/sandboxes\/([^/]+)$/))) {
      if (method === "GET") return sendJson(res, 200, await this.info(this.#owned(caller, m[1]!)));
      if (method === "DELETE") {
        await this.kill(this.#owned(caller, m[1]!));
        res.writeHead(204).end();
        return;
      }
    }
    if (method === "POST" && (m = path.match(/^\/sandboxes\/([^/]+)\/timeout$/))) {
      const body = await jsonBody(req);
      this.#arm(this.#owned(caller, m[1]!), timeoutOf(body.timeout, true));
      res.writeHead(204).end();
      return;
    }
    if (method === "POST" && (m = path.match(/^\/sandboxes\/([^/]+)\/pause$/))) {
      await this.pause(this.#owned(caller, m[1]!));
      res.writeHead(204).end();
      return;
    }
    if (method === "POST" && (m = path.match(/^\/v2\/sandboxes\/([^/]+)\/connect$|^\/sandboxes\/([^/]+)\/resume$/))) {
      const body = await jsonBody(req);
      return sendJson(res, 201, await this.connect(this.#owned(caller, (m[1] ?? m[2])!), body.timeout));
    }
    throw new PlatformError(Code.NotFound, "not_found", `no route ${method} ${path}`);
  }

  async #authenticate(req: IncomingMessage): Promise<Caller> {
    const key = headersOf(req).get("x-api-key") ?? "";
    if (!key)
      throw new PlatformError(Code.Unauthenticated, "unauthenticated", "X-API-KEY is required: a platform API key");
    const caller = await this.verify(key);
    // Running code in a sandbox is running a session: a key needs sessions:run (a person's JWT has no scopes).
    if (caller.scopes && !caller.scopes.includes("sessions:run"))
      throw new PlatformError(Code.PermissionDenied, "insufficient_scope", "this API key lacks the sessions:run scope");
    return caller;
  }

  #owned(caller: Caller, id: string): E2bSandbox {
    const r = this.records.owned(id, caller.orgId);
    if (!r) throw new PlatformError(Code.NotFound, "not_found", `sandbox ${JSON.stringify(id.slice(0, 64))} not found`);
    return r;
  }

  async create(caller: Caller, body: Record<string, unknown>): Promise<object> {
    const templateId = body.templateID === undefined ? TEMPLATE : body.templateID;
    if (templateId !== TEMPLATE)
      throw new PlatformError(
        Code.InvalidArgument,
        "template_not_served",
        `template ${JSON.stringify(String(templateId).slice(0, 64))} is not served by this platform: only '${TEMPLATE}' (its sandbox image); templates built from Dockerfiles are not served`,
      );
    if (body.mcp) throw notServed("MCP gateways are not served by this platform");
    if (body.volumeMounts) throw notServed("volumes are not served by this platform");
    const metadata = stringMap(body.metadata, "metadata");
    const envs = stringMap(body.envVars, "envVars");
    const timeoutS = timeoutOf(body.timeout, false);
    const networkPolicy = networkOf(body.allow_internet_access, body.network);
    const sandboxId = await this.compute.createSandbox({
      tenantId: caller.orgId,
      // Each E2B sandbox is its own session: a fresh workspace.
      sessionId: randomUUID(),
      mountPath: HOME,
      // E2B's timeout is enforced here (setTimeout moves it); compute's own deadline, E2B's
      // longest life of a sandbox (24 h), ends it even if this service is down then.
      maxRuntimeMs: MAX_TIMEOUT_S * 1000,
      networkPolicy,
    });
    const { token, hash } = newAccessToken();
    const now = new Date();
    const record: E2bSandbox = {
      sandboxId,
      orgId: caller.orgId,
      templateId: TEMPLATE,
      metadata,
      envs,
      startedAt: now,
      endAt: now,
      accessToken: token,
      accessTokenHash: hash,
      processes: new ProcessTable(this.compute, sandboxId, envs),
    };
    this.records.add(record);
    this.#arm(record, timeoutS);
    return this.#created(record);
  }

  #created(r: E2bSandbox): object {
    return {
      templateID: r.templateId,
      sandboxID: r.sandboxId,
      clientID: "platform",
      envdVersion: ENVD_VERSION,
      envdAccessToken: r.accessToken,
      trafficAccessToken: null,
      domain: null,
    };
  }

  /** E2B's timeout: the sandbox is killed when it runs out (setTimeout moves it). */
  #arm(r: E2bSandbox, timeoutS: number): void {
    if (r.timer) clearTimeout(r.timer);
    r.endAt = new Date(Date.now() + timeoutS * 1000);
    r.timer = setTimeout(() => void this.kill(r).catch(() => {}), timeoutS * 1000);
    r.timer.unref();
  }

  async #state(r: E2bSandbox): Promise<"running" | "paused" | undefined> {
    const status: SandboxStatus = await this.compute.status(r.sandboxId);
    if (status === "PAUSED") return "paused";
    if (status === "READY" || status === "STARTING") return "running";
    // Failed or destroyed behind this surface (compute's DestroySandbox): gone here too.
    this.records.delete(r.sandboxId);
    return undefined;
  }

  async info(r: E2bSandbox): Promise<object> {
    const state = await this.#state(r);
    if (!state) throw new PlatformError(Code.NotFound, "not_found", `sandbox ${r.sandboxId} not found`);
    return this.#listed(r, state);
  }

  #listed(r: E2bSandbox, state: string): object {
    return {
      templateID: r.templateId,
      sandboxID: r.sandboxId,
      clientID: "platform",
      startedAt: r.startedAt.toISOString(),
      endAt: r.endAt.toISOString(),
      state,
      cpuCount: 1,
      memoryMB: 512,
      diskSizeMB: 0,
      envdVersion: ENVD_VERSION,
      metadata: r.metadata,
      volumeMounts: [],
    };
  }

  async list(caller: Caller, q: URLSearchParams): Promise<object[]> {
    const states = (q.get("state") ?? "").split(",").filter(Boolean);
    const meta = new URLSearchParams(q.get("metadata") ?? "");
    const out: object[] = [];
    for (const r of this.records.ofOrg(caller.orgId)) {
      const state = await this.#state(r);
      if (!state || (states.length > 0 && !states.includes(state))) continue;
      let match = true;
      for (const [k, v] of meta) if (r.metadata[decodeURIComponent(k)] !== decodeURIComponent(v)) match = false;
      if (match) out.push(this.#listed(r, state));
    }
    return out;
  }

  async kill(r: E2bSandbox): Promise<void> {
    // Destroying the sandbox ends its commands, and so their exec streams; cancelling those
    // streams from here could leave compute waiting on a stream nobody reads.
    await this.compute.destroySandbox(r.sandboxId);
    // Only once compute has destroyed it: a failed destroy leaves it reachable (and killable) here.
    this.records.delete(r.sandboxId);
  }

  async pause(r: E2bSandbox): Promise<void> {
    const state = await this.#state(r);
    if (!state) throw new PlatformError(Code.NotFound, "not_found", `sandbox ${r.sandboxId} not found`);
    if (state === "paused") throw new PlatformError(Code.AlreadyExists, "already_paused", "sandbox is already paused");
    // Compute refuses a pause while an exec streams; one that just ended may
    // still hold the sandbox for a moment after its last event reached us.
    for (let attempt = 0; ; attempt++) {
      try {
        await this.compute.pauseSandbox(r.sandboxId);
        return;
      } catch (err) {
        const busy =
          err instanceof PlatformError && err.code === Code.FailedPrecondition && err.reason === "sandbox_busy";
        if (!busy || attempt >= 10) throw err;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }

  async connect(r: E2bSandbox, timeout: unknown): Promise<object> {
    const state = await this.#state(r);
    if (!state) throw new PlatformError(Code.NotFound, "not_found", `sandbox ${r.sandboxId} not found`);
    if (state === "paused") await this.compute.resumeSandbox(r.sandboxId);
    if (timeout !== undefined) {
      const t = timeoutOf(timeout, true);
      // Connecting never shortens a sandbox's life (E2B's rule).
      if (Date.now() + t * 1000 > r.endAt.getTime()) this.#arm(r, t);
    }
    return this.#created(r);
  }
}

async function jsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const raw = await readBody(req, 64 * 1024);
  if (raw.length === 0) return {};
  let v: unknown;
  try {
    v = JSON.parse(raw.toString("utf8"));
  } catch {
    throw new PlatformError(Code.InvalidArgument, "invalid_argument", "body is not JSON");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v))
    throw new PlatformError(Code.InvalidArgument, "invalid_argument", "body must be a JSON object");
  return v as Record<string, unknown>;
}

/**
 * E2B's network options as compute's NetworkPolicy: `allowInternetAccess:
 * true` is allow_all, `network.allowOut` names domains and CIDRs. Without
 * either the sandbox has compute's default, no network (E2B's default is
 * internet access: the platform's is not). The rest of E2B's network
 * options (denyOut, rules, egress proxies, public traffic) are refused.
 */
function networkOf(allowInternet: unknown, network: unknown): NetworkPolicy | undefined {
  if (allowInternet !== undefined && allowInternet !== null && typeof allowInternet !== "boolean")
    throw new PlatformError(Code.InvalidArgument, "invalid_argument", "allow_internet_access must be a boolean");
  let allowOut: string[] = [];
  if (network !== undefined && network !== null) {
    if (typeof network !== "object" || Array.isArray(network))
      throw new PlatformError(Code.InvalidArgument, "invalid_argument", "network must be an object");
    const { allowOut: out, ...rest } = network as Record<string, unknown>;
    if (Object.keys(rest).length > 0)
      throw notServed(
        `network options ${Object.keys(rest).sort().join(", ")} are not served by this platform: only allowOut (domains and CIDRs) and allowInternetAccess`,
      );
    if (out !== undefined) {
      if (!Array.isArray(out) || out.length > 512 || !out.every((x) => typeof x === "string" && x.length <= 253))
        throw new PlatformError(
          Code.InvalidArgument,
          "invalid_argument",
          "network.allowOut must be at most 512 domains or CIDRs",
        );
      allowOut = out as string[];
    }
  }
  if (allowInternet !== true && allowOut.length === 0) return undefined;
  const isCidr = (x: string) => x.includes("/") || /^[0-9.]+$/.test(x) || x.includes(":");
  return {
    allowAll: allowInternet === true,
    allowedDomains: allowOut.filter((x) => !isCidr(x)),
    allowedCidrs: allowOut.filter(isCidr).map((x) => (x.includes("/") ? x : x.includes(":") ? `${x}/128` : `${x}/32`)),
  };
}

function timeoutOf(v: unknown, required: boolean): number {
  if (v === undefined || v === null) {
    if (required) throw new PlatformError(Code.InvalidArgument, "invalid_argument", "timeout is required");
    return DEFAULT_TIMEOUT_S;
  }
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > MAX_TIMEOUT_S)
    throw new PlatformError(
      Code.InvalidArgument,
      "invalid_argument",
      `timeout must be whole seconds between 1 and ${MAX_TIMEOUT_S}`,
    );
  return v;
}

function stringMap(v: unknown, name: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (typeof v !== "object" || Array.isArray(v))
    throw new PlatformError(Code.InvalidArgument, "invalid_argument", `${name} must be an object of strings`);
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > 64)
    throw new PlatformError(Code.InvalidArgument, "invalid_argument", `${name} has more than 64 keys`);
  const out: Record<string, string> = {};
  for (const [k, x] of entries) {
    if (
      typeof x !== "string" ||
      k.length === 0 ||
      k.length > 256 ||
      x.length > 4096 ||
      k.includes("\0") ||
      x.includes("\0")
    )
      throw new PlatformError(
        Code.InvalidArgument,
        "invalid_argument",
        `${name}: keys of 1-256 and string values of at most 4096 characters, no NUL`,
      );
    out[k] = x;
  }
  return out;
}
