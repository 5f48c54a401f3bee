#!/usr/bin/env node
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import * as commands from "./commands.ts";
import { loadEndpoints, UsageError } from "./endpoints.ts";
import { ApiError, PlatformClient } from "./http.ts";

const usage = `platform: the agent platform's command-line client

  platform login --email <email> [--password <pw>]   (or PLATFORM_PASSWORD, or typed on stdin)
  platform logout | whoami
  platform api-keys list | create --name <n> [--env live|test] [--expires-at <rfc3339>] | revoke <id>
  platform agents list [--limit n] | create --name <n> [--slug s] [--model dev/echo] [--system-prompt p] | get <id|slug>
  platform sessions create <agent id|slug> | get <session id>
  platform chat <session id> [message]     one turn, or a conversation read from stdin
  platform chat --agent <id|slug> [message] a new session with that agent

Endpoints come from platform.json in PLATFORM_DATA_DIR (default ./.data), written by the launcher,
or from PLATFORM_IDENTITY_URL, PLATFORM_AGENTS_URL, PLATFORM_ROUTER_URL. PLATFORM_API_KEY may stand
in for a login.`;

const io: commands.Output = {
  line: (t) => process.stdout.write(`${t}\n`),
  write: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(`${t}\n`),
};

async function readPassword(flag: string | undefined): Promise<string> {
  if (flag) return flag;
  if (process.env.PLATFORM_PASSWORD) return process.env.PLATFORM_PASSWORD;
  if (process.stdin.isTTY) process.stderr.write("password: ");
  for await (const line of createInterface({ input: process.stdin })) return line;
  throw new UsageError("no password given");
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: false,
    options: {
      help: { type: "boolean", short: "h" },
      ...Object.fromEntries(
        ["email", "password", "name", "slug", "model", "system-prompt", "env", "expires-at", "limit", "after", "agent", "id"].map(
          (name) => [name, { type: "string" as const }],
        ),
      ),
    },
  });
  const [command, action, ...rest] = positionals;
  if (!command || values.help || command === "help") {
    io.line(usage);
    return;
  }
  const flags = values as Record<string, string | boolean | undefined>;
  const client = new PlatformClient(loadEndpoints());
  switch (command) {
    case "login":
      return commands.login(client, flags, io, await readPassword(typeof flags.password === "string" ? flags.password : undefined));
    case "logout":
      return commands.logout(client, io);
    case "whoami":
      return commands.whoami(client, io);
    case "api-keys":
      return commands.apiKeys(client, action, rest, flags, io);
    case "agents":
      return commands.agents(client, action, rest, flags, io);
    case "sessions":
      return commands.sessions(client, action, rest, flags, io);
    case "chat":
      return chat(client, flags, [action, ...rest].filter((x): x is string => x !== undefined));
    default:
      throw new UsageError(`unknown command ${command}\n\n${usage}`);
  }
}

async function chat(client: PlatformClient, flags: Record<string, string | boolean | undefined>, args: string[]) {
  let sessionId: string;
  let words = args;
  if (typeof flags.agent === "string") {
    const created: string[] = [];
    await commands.sessions(client, "create", [flags.agent], {}, { ...io, line: (t) => created.push(t) });
    sessionId = /session (\S+)/.exec(created[0] ?? "")![1];
    io.err(created[0]);
  } else {
    if (!args[0]) throw new UsageError("chat needs a session id or --agent <id|slug>");
    sessionId = args[0];
    words = args.slice(1);
  }
  if (words.length > 0) return commands.chatTurn(client, sessionId, words.join(" "), io);
  if (process.stdin.isTTY) io.err("type a message and press enter; Ctrl-D ends the conversation");
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim()) await commands.chatTurn(client, sessionId, line, io);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof ApiError) io.err(`error: ${err.code}: ${err.message}${err.status ? ` (HTTP ${err.status})` : ""}`);
  else if (err instanceof UsageError) io.err(`error: ${err.message}`);
  else io.err(`error: ${(err as Error)?.message ?? String(err)}`);
  process.exitCode = 1;
});
