#!/usr/bin/env node
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { chat } from "./chat.ts";
import * as commands from "./commands.ts";
import { bashCompletion, zshCompletion } from "./completion.ts";
import { filesDownload, filesList, filesUpload } from "./files.ts";
import { CliError, loadEndpoints, UsageError } from "./endpoints.ts";
import { ApiError, PlatformClient } from "./http.ts";
import { type Output, processOutput, quietOnEpipe } from "./output.ts";
import { type CommandSpec, commandUsage, findCommand, groupUsage, optionsOf, usage } from "./spec.ts";
import { scheduleHandlers } from "./schedules.ts";
import { imageHandlers } from "./images.ts";
import { webhookHandlers } from "./webhooks.ts";
import { status } from "./status.ts";
import { accountHandlers } from "./account.ts";
import { teamHandlers } from "./teams.ts";
import { usageCommand } from "./usage.ts";

const VERSION = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;

/** A usage error names the command whose usage is printed with it. */
class CommandUsageError extends UsageError {
  constructor(
    message: string,
    readonly help: string,
  ) {
    super(message);
  }
}

async function readPassword(flag: string | undefined): Promise<string> {
  if (flag) return flag;
  if (process.env.PLATFORM_PASSWORD) return process.env.PLATFORM_PASSWORD;
  if (process.stdin.isTTY) process.stderr.write("password: ");
  for await (const line of createInterface({ input: process.stdin })) return line;
  throw new CliError("no password given (--password, PLATFORM_PASSWORD or a line on stdin)");
}

type Handler = (ctx: commands.Context, args: string[], flags: commands.Flags) => Promise<unknown>;

const handlers: Record<string, Handler> = {
  login: async (ctx, _args, flags) =>
    commands.login(ctx, flags, await readPassword(typeof flags.password === "string" ? flags.password : undefined)),
  logout: (ctx) => commands.logout(ctx),
  whoami: (ctx) => commands.whoami(ctx),
  status: async (ctx) => {
    if (!(await status(ctx))) process.exitCode = 1;
  },
  "api-keys list": (ctx, _args, flags) => commands.apiKeysList(ctx, flags),
  "api-keys create": (ctx, _args, flags) => commands.apiKeysCreate(ctx, flags),
  "api-keys revoke": (ctx, args, flags) => commands.apiKeysRevoke(ctx, args, flags),
  "agents list": (ctx, _args, flags) => commands.agentsList(ctx, flags),
  "agents create": (ctx, _args, flags) => commands.agentsCreate(ctx, flags),
  "agents get": (ctx, args) => commands.agentsGet(ctx, args),
  "agents update": (ctx, args, flags) => commands.agentsUpdate(ctx, args, flags),
  "agents delete": (ctx, args) => commands.agentsDelete(ctx, args),
  "sessions list": (ctx, _args, flags) => commands.sessionsList(ctx, flags),
  "sessions create": (ctx, args) => commands.sessionsCreate(ctx, args),
  "sessions get": (ctx, args) => commands.sessionsGet(ctx, args),
  "sessions delete": (ctx, args) => commands.sessionsDelete(ctx, args),
  "files ls": (ctx, args, flags) => filesList(ctx, args, flags),
  "files upload": (ctx, args) => filesUpload(ctx, args),
  "files download": (ctx, args) => filesDownload(ctx, args),
  ...teamHandlers(readPassword),
  ...accountHandlers,
  ...scheduleHandlers,
  ...imageHandlers,
  ...webhookHandlers,
  chat: (ctx, args, flags) => chat(ctx, args, flags),
  usage: (ctx, _args, flags) => usageCommand(ctx, flags),
  completion: async (ctx, args) => {
    const shell = args[0];
    const script = shell === "bash" ? bashCompletion() : shell === "zsh" ? zshCompletion() : undefined;
    if (script === undefined) throw new UsageError(`no completion for ${shell}: bash or zsh`);
    if (ctx.io.json) ctx.io.value({ shell, script });
    else ctx.io.write(script);
  },
};

/** argv after the command words, parsed strictly against the command's flags. */
function parseCommand(spec: CommandSpec, rest: string[]) {
  const help = commandUsage(spec);
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: rest, options: optionsOf(spec), strict: true, allowPositionals: true });
  } catch (err) {
    // node:util's messages name the flag: "Unknown option '--x'", "Option '--name <value>' argument missing".
    throw new CommandUsageError(
      (err as Error).message.split(". ")[0]!.replace(/^Unknown option/, "unknown flag"),
      help,
    );
  }
  const positionals = parsed.positionals;
  const min = spec.min ?? 0;
  const max = spec.max ?? 0;
  if (positionals.length < min) throw new CommandUsageError(`missing argument: ${spec.args}`, help);
  if (positionals.length > max) throw new CommandUsageError(`unexpected argument: ${positionals[max]}`, help);
  return { flags: parsed.values as commands.Flags, positionals, help };
}

async function main(argv: string[], json: boolean, io: Output): Promise<void> {
  const [first] = argv;
  if (first === "--version" || first === "-V")
    return json ? io.value({ version: VERSION }) : io.line(`platform ${VERSION}`);
  if (first === undefined || first === "--help" || first === "-h" || (first === "--json" && argv.length === 1))
    return io.line(usage());
  if (first === "help") {
    const target = findCommand(argv.slice(1).filter((a) => a !== "--json"));
    if (argv.length > 1 && !target.spec && !target.group)
      throw new CommandUsageError(`unknown command ${argv[1]}`, usage());
    return io.line(target.spec ? commandUsage(target.spec) : target.group ? groupUsage(target.group) : usage());
  }
  const { spec, group, rest } = findCommand(argv);
  // `platform sessions --help`: the group's actions, not its default action's flags.
  if (group && (argv[1] === "--help" || argv[1] === "-h")) return io.line(groupUsage(group));
  if (!spec) {
    if (group) {
      if (rest.includes("--help") || rest.includes("-h")) return io.line(groupUsage(group));
      throw new CommandUsageError(`unknown ${group} action ${argv[1]}`, groupUsage(group));
    }
    throw new CommandUsageError(`unknown command ${first}`, usage());
  }
  const { flags, positionals, help } = parseCommand(spec, rest);
  if (flags.help) return io.line(help);
  let client: PlatformClient | undefined;
  const ctx: commands.Context = { io, client: () => (client ??= new PlatformClient(loadEndpoints())) };
  try {
    await handlers[spec.path.join(" ")]!(ctx, positionals, flags);
  } catch (err) {
    // A flag the handler found missing or wrong: the command's usage goes with it.
    if (err instanceof UsageError && !(err instanceof CommandUsageError))
      throw new CommandUsageError(err.message, help);
    throw err;
  }
}

// `--json` may also come before the command.
const given = process.argv.slice(2);
const argv = given[0] === "--json" && given.length > 1 ? [...given.slice(1), "--json"] : given;
const json = argv.includes("--json");
const io = processOutput(json);
quietOnEpipe();

main(argv, json, io).then(
  () => {
    process.exitCode ??= 0;
  },
  (err: unknown) => {
    const { code, message, status, exit } =
      err instanceof ApiError
        ? { code: err.code, message: err.message, status: err.status || undefined, exit: 1 }
        : err instanceof UsageError
          ? { code: "usage", message: err.message, status: undefined, exit: 2 }
          : err instanceof CliError
            ? { code: err.code, message: err.message, status: undefined, exit: 1 }
            : { code: "internal", message: (err as Error)?.message ?? String(err), status: undefined, exit: 1 };
    if (json) io.err(JSON.stringify({ error: { code, message, ...(status ? { status } : {}), exitCode: exit } }));
    else
      io.err(
        `error: ${code === "usage" || code === "cli_error" || code === "internal" ? "" : `${code}: `}${message}${status ? ` (HTTP ${status})` : ""}`,
      );
    if (!json && err instanceof CommandUsageError) io.err(`\n${err.help}`);
    process.exitCode = exit;
  },
);
