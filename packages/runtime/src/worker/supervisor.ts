/**
 * What a worker process and the local orchestrator that started it say to
 * each other on Node's IPC channel. A worker started as a spare (SPARE_ENV
 * set) has loaded its code but serves nobody: it waits for `adopt`, which
 * carries the deployment's environment (TENANT_ID, ORG_ID, PORT, ...), so a
 * tenant's cold start skips process start and module loading. It says
 * `waiting` once it listens (a message sent earlier could be lost). Every worker
 * reports `ready` once its port is bound, sooner than health polling sees it.
 */
export const SPARE_ENV = "RUNTIME_WORKER_SPARE";

export interface AdoptMessage {
  type: "adopt";
  env: Record<string, string>;
}

export interface WaitingMessage {
  type: "waiting";
}

export interface ReadyMessage {
  type: "ready";
  port: number;
}

export function isAdopt(m: unknown): m is AdoptMessage {
  return (
    typeof m === "object" &&
    m !== null &&
    (m as AdoptMessage).type === "adopt" &&
    typeof (m as AdoptMessage).env === "object"
  );
}

export function isWaiting(m: unknown): m is WaitingMessage {
  return typeof m === "object" && m !== null && (m as WaitingMessage).type === "waiting";
}

export function isReady(m: unknown): m is ReadyMessage {
  return typeof m === "object" && m !== null && (m as ReadyMessage).type === "ready";
}

/** Started as a spare: its deployment arrives on the IPC channel. */
export function isSpare(): boolean {
  return process.env[SPARE_ENV] === "1" && process.send !== undefined;
}

/**
 * In a spare, resolves once the orchestrator hands over a deployment, with
 * the deployment's environment merged into process.env; at once otherwise.
 */
export function adoption(): Promise<void> {
  if (!isSpare()) return Promise.resolve();
  return new Promise((resolve) => {
    const onMessage = (m: unknown) => {
      if (!isAdopt(m)) return;
      process.off("message", onMessage);
      delete process.env[SPARE_ENV];
      Object.assign(process.env, m.env);
      resolve();
    };
    process.on("message", onMessage);
    const waiting: WaitingMessage = { type: "waiting" };
    process.send?.(waiting);
  });
}

/** Tells the orchestrator (when there is one on the IPC channel) that the port is bound. */
export function reportReady(port: number): void {
  const ready: ReadyMessage = { type: "ready", port };
  process.send?.(ready);
}
