import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { IpcCalls } from "../host/ipc-calls.ts";
import type { OpenLoopResult } from "./open-loop.ts";

const CHILD = fileURLToPath(new URL("./load-child.ts", import.meta.url));
/** Beyond a request's own duration: the child answers at once after it. */
const ANSWER_MS = 60_000;

/** The bench's side of load-child.ts: VerifyAPIKey load offered from a process of its own. */
export class LoadProcess {
  readonly #calls: IpcCalls;

  private constructor(private readonly child: ChildProcess) {
    this.#calls = new IpcCalls(child, "load generator");
    child.once("exit", (code) => this.#calls.rejectAll(new Error(`load generator exited (${code})`)));
  }

  static start(): LoadProcess {
    // Buffers (the TLS files) cross as they are.
    return new LoadProcess(
      fork(CHILD, [], {
        execArgv: ["--import", "tsx"],
        serialization: "advanced",
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      }),
    );
  }

  /** An HTTP/2 connection named `name` (mutual TLS with `tls`). */
  connect(name: string, url: string, tls?: { ca: Buffer; cert: Buffer; key: Buffer }): Promise<void> {
    return this.#calls.request("connect", ANSWER_MS, { name, url, ...(tls ? { tls } : {}) });
  }

  /** `times` VerifyAPIKey calls one after another on `name`. */
  verifyAPIKey(name: string, apiKey: string, times: number): Promise<void> {
    return this.#calls.request("verifyAPIKey", ANSWER_MS, { name, apiKey, times });
  }

  /** VerifyAPIKey on `name` offered at `rate`/s for `seconds` (open loop). */
  openLoop(name: string, apiKey: string, rate: number, seconds: number): Promise<OpenLoopResult> {
    return this.#calls.request("openLoop", seconds * 1000 + ANSWER_MS, { name, apiKey, rate, seconds });
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    await this.#calls.request("close", ANSWER_MS).catch(() => {});
    this.child.disconnect();
    await exited;
  }
}
