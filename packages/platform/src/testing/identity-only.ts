import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { seedPgliteDataDir } from "@platform/db/testing";
import { freePort } from "./platform-stack.ts";
import { serviceArgv } from "./service-bundles.ts";

const root = new URL("../../../../", import.meta.url).pathname;
const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;

export const IDENTITY_OWNER = { email: "owner@example.com", password: "owner-password-1" };

export type CliResult = { code: number | null; stdout: string; stderr: string };

/**
 * The identity service alone (its real main, as a process, on PGlite in a
 * throw-away directory) and the `platform` binary pointed at it, one config
 * directory per person: for the commands that talk to identity only.
 */
export async function startIdentityOnly() {
  const dir = mkdtempSync(join(tmpdir(), "platform-teams-"));
  await seedPgliteDataDir(join(dir, "identity"));
  const [rest, grpc] = [await freePort("127.0.0.1"), await freePort("127.0.0.1")];
  const url = `http://127.0.0.1:${rest}`;
  let logs = "";
  const child: ChildProcess = spawn(process.execPath, (await serviceArgv()).identity, {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? "",
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      SHUTDOWN_TIMEOUT: "2s",
      INTERNAL_TLS: "off",
      SERVER_PORT: String(rest),
      IDENTITY_GRPC_PORT: String(grpc),
      IDENTITY_AUTHKEY_KEK: randomBytes(32).toString("hex"),
      IDENTITY_DATA_DIR: join(dir, "identity"),
      ARGON2_MEMORY_KIB: "1024",
      ARGON2_TIME_COST: "1",
      BOOTSTRAP_OWNER_EMAIL: IDENTITY_OWNER.email,
      BOOTSTRAP_OWNER_PASSWORD: IDENTITY_OWNER.password,
      BOOTSTRAP_ORG_NAME: "First Org",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (c: Buffer) => (logs += c));
  child.stderr!.on("data", (c: Buffer) => (logs += c));
  const reap = () => child.kill("SIGKILL");
  process.once("exit", reap);

  async function stop() {
    process.off("exit", reap);
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(kill);
    }
    rmSync(dir, { recursive: true, force: true });
  }

  const deadline = Date.now() + 300_000;
  while (
    !(await fetch(`${url}/readyz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`identity did not start:\n${logs}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }

  /** The binary as `who`; `input`, when given, is its stdin (else it is empty). */
  function run(who: string, args: string[], env: Record<string, string> = {}, input?: string): Promise<CliResult> {
    return new Promise((resolve) => {
      const p = spawn(process.execPath, [bin, ...args], {
        env: {
          PATH: process.env.PATH ?? "",
          PLATFORM_CONFIG_DIR: join(dir, `config-${who}`),
          PLATFORM_DATA_DIR: join(dir, "no-launcher"),
          PLATFORM_IDENTITY_URL: url,
          // Not used by identity's commands; the CLI wants all three named.
          PLATFORM_AGENTS_URL: "http://127.0.0.1:9",
          PLATFORM_ROUTER_URL: "http://127.0.0.1:9",
          ...env,
        },
        stdio: ["pipe", "pipe", "pipe"],
      });
      // No input: an empty stdin, at its end at once (as /dev/null would be).
      p.stdin.end(input ?? "");
      let stdout = "";
      let stderr = "";
      p.stdout.on("data", (c: Buffer) => (stdout += c));
      p.stderr.on("data", (c: Buffer) => (stderr += c));
      p.on("close", (code) => resolve({ code, stdout, stderr }));
    });
  }
  async function ok(who: string, args: string[], env?: Record<string, string>): Promise<CliResult> {
    const r = await run(who, args, env);
    assert.equal(r.code, 0, `${who}: platform ${args.join(" ")} → ${r.code}\n${r.stdout}\n${r.stderr}`);
    return r;
  }
  const json = async (who: string, args: string[], env?: Record<string, string>) =>
    JSON.parse((await ok(who, [...args, "--json"], env)).stdout);
  const errorOf = (r: CliResult) => JSON.parse(r.stderr).error as { code: string; status?: number; exitCode: number };
  const login = (who: string) =>
    ok(who, ["login", "--email", IDENTITY_OWNER.email], { PLATFORM_PASSWORD: IDENTITY_OWNER.password });

  return { url, run, ok, json, errorOf, login, stop };
}
