// Every command of the CLI, its arguments and its flags: the one table the
// parser (strict, per command), the help texts and the shell completions
// are made from, so they cannot disagree.

import { ACCOUNT_COMMANDS } from "./account.ts";
import { SCHEDULE_COMMANDS } from "./schedules.ts";
import { IMAGE_COMMANDS } from "./images.ts";
import { WEBHOOK_COMMANDS } from "./webhooks.ts";
import { TEAM_COMMANDS } from "./teams.ts";
import { BUDGET_OPTIONS, USAGE_COMMANDS } from "./usage.ts";

export type OptionSpec = {
  type: "string" | "boolean";
  short?: string;
  /** Placeholder of a string flag's value in the usage line. */
  value?: string;
  help: string;
  required?: boolean;
  /** A string flag that may be given more than once (its values gather in order). */
  multiple?: boolean;
};

export type CommandSpec = {
  /** ["agents", "list"] or ["whoami"]. */
  path: string[];
  summary: string;
  /** Positional arguments as the usage shows them. */
  args?: string;
  /** Bounds on the positional arguments (after the command words). */
  min?: number;
  max?: number;
  options?: Record<string, OptionSpec>;
  /** What a bare `platform <group>` runs. */
  isDefault?: boolean;
};

/** Flags every command takes. */
export const COMMON_OPTIONS: Record<string, OptionSpec> = {
  json: { type: "boolean", help: "machine output: one JSON document (chat: one JSON object per line)" },
  help: { type: "boolean", short: "h", help: "this command's usage" },
};

const page = (what: string): Record<string, OptionSpec> => ({
  limit: { type: "string", value: "n", help: `${what} per page, 1 to 100 (default 20)` },
  after: {
    type: "string",
    value: "cursor",
    help: "the page after this cursor (printed as the `more:` hint, `next` in --json)",
  },
});

const orgKeys = (help: string): OptionSpec => ({ type: "boolean", help });

const agentFields = (required: boolean): Record<string, OptionSpec> => ({
  name: { type: "string", value: "name", help: "display name", required },
  slug: {
    type: "string",
    value: "slug",
    help: required ? "unique in the org (default: from the name)" : "unique in the org",
  },
  model: {
    type: "string",
    value: "provider/model",
    help: required ? "anthropic/..., openai/..., dev/... (default dev/echo)" : "anthropic/..., openai/..., dev/...",
  },
  "system-prompt": { type: "string", value: "text", help: "the system prompt" },
  ask: {
    type: "string",
    value: "tool",
    multiple: true,
    help: "ask before each call of this tool (bash, write_file, ...; repeatable or comma-separated); `platform chat` asks y/n",
  },
  ...BUDGET_OPTIONS,
  ...(required
    ? {}
    : {
        allow: {
          type: "string",
          value: "tool",
          multiple: true,
          help: "run this tool's calls without asking again (repeatable or comma-separated)",
        },
      }),
});

export const COMMANDS: CommandSpec[] = [
  {
    path: ["login"],
    summary: "log in; the password comes from --password, PLATFORM_PASSWORD or stdin",
    options: {
      email: { type: "string", value: "email", help: "the account's email", required: true },
      password: {
        type: "string",
        value: "password",
        help: "the password (visible in the process list: prefer PLATFORM_PASSWORD or stdin)",
      },
    },
  },
  { path: ["logout"], summary: "revoke the stored refresh token and forget the login" },
  { path: ["whoami"], summary: "the logged-in user" },
  { path: ["status"], summary: "whether each service answers /readyz, where it listens and its version" },
  {
    path: ["api-keys", "list"],
    summary: "your API keys (--org: the organization's)",
    isDefault: true,
    options: { org: orgKeys("list the organization's keys instead of yours (owners)") },
  },
  {
    path: ["api-keys", "create"],
    summary: "a new API key (the raw key is printed first, once)",
    options: {
      name: { type: "string", value: "name", help: "a label for the key", required: true },
      env: { type: "string", value: "live|test", help: "the key's environment" },
      "expires-at": { type: "string", value: "rfc3339", help: "when it stops working" },
      scope: {
        type: "string",
        value: "scope[,scope]",
        multiple: true,
        help: "what the key may do: read, agents:write, sessions:run, admin (repeatable; default: all but admin)",
      },
      org: orgKeys("owned by the organization, not you: it keeps working after you leave (owners)"),
    },
  },
  {
    path: ["api-keys", "revoke"],
    summary: "revoke an API key",
    args: "<key id>",
    min: 1,
    max: 1,
    options: { org: orgKeys("an organization key (owners)") },
  },
  { path: ["agents", "list"], summary: "the org's agents, newest first", options: page("agents"), isDefault: true },
  { path: ["agents", "create"], summary: "a new agent", options: agentFields(true) },
  { path: ["agents", "get"], summary: "one agent", args: "<agent id|slug>", min: 1, max: 1 },
  {
    path: ["agents", "update"],
    summary: "change an agent's name, slug, model, system prompt or tool permissions",
    args: "<agent id|slug>",
    min: 1,
    max: 1,
    options: agentFields(false),
  },
  {
    path: ["agents", "delete"],
    summary: "delete an agent (its sessions stay readable)",
    args: "<agent id|slug>",
    min: 1,
    max: 1,
  },
  {
    path: ["sessions", "list"],
    summary: "the org's sessions, or one agent's, newest first",
    options: { agent: { type: "string", value: "id|slug", help: "only this agent's sessions" }, ...page("sessions") },
    isDefault: true,
  },
  { path: ["sessions", "create"], summary: "a new session with an agent", args: "<agent id|slug>", min: 1, max: 1 },
  { path: ["sessions", "get"], summary: "a session and its event log", args: "<session id>", min: 1, max: 1 },
  {
    path: ["sessions", "delete"],
    summary: "delete a session: its run is cancelled and its sandbox destroyed",
    args: "<session id>",
    min: 1,
    max: 1,
  },
  {
    path: ["files", "ls"],
    summary: "list a directory of a session's workspace (default its root)",
    args: "<session id> [path]",
    min: 1,
    max: 2,
    options: { recursive: { type: "boolean", short: "r", help: "the whole tree under the directory" } },
    isDefault: true,
  },
  {
    path: ["files", "upload"],
    summary: "copy a local file into a session's workspace, streamed in chunks (a progress bar on a terminal)",
    args: "<session id> <local file> [remote path]",
    min: 2,
    max: 3,
  },
  {
    path: ["files", "download"],
    summary: "copy a file of a session's workspace here, streamed in chunks (`-` for stdout)",
    args: "<session id> <remote path> [local file|-]",
    min: 2,
    max: 3,
  },
  {
    path: ["chat"],
    summary:
      "one turn (a message), or a conversation read from stdin; asks y/n (from stdin) for tools the agent asks about; Ctrl-C cancels the run",
    args: "[<session id>] [message...]",
    max: Number.POSITIVE_INFINITY,
    options: { agent: { type: "string", value: "id|slug", help: "start a new session with this agent" } },
  },
  ...TEAM_COMMANDS,
  ...USAGE_COMMANDS,
  ...SCHEDULE_COMMANDS,
  ...IMAGE_COMMANDS,
  ...WEBHOOK_COMMANDS,
  ...ACCOUNT_COMMANDS,
  {
    path: ["completion"],
    summary: "a shell completion script: source <(platform completion bash)",
    args: "bash|zsh",
    min: 1,
    max: 1,
  },
];

/** Command groups (the first word of commands with an action). */
export const GROUPS = [...new Set(COMMANDS.filter((c) => c.path.length === 2).map((c) => c.path[0]!))];

export function optionsOf(spec: CommandSpec): Record<string, OptionSpec> {
  return { ...spec.options, ...COMMON_OPTIONS };
}

export const EXIT_CODES = `Exit codes:
  0    success
  1    the platform answered an error, could not be reached, or is not configured (not logged in, no endpoints)
  2    usage: unknown command or flag, missing or extra argument
  130  interrupted (Ctrl-C; a chat's run is cancelled first)`;

function optionLine(name: string, o: OptionSpec): string {
  const flag = `${o.short ? `-${o.short}, ` : ""}--${name}${o.type === "string" ? ` <${o.value ?? "value"}>` : ""}`;
  return `  ${flag.padEnd(30)} ${o.help}${o.required ? " (required)" : ""}`;
}

/** `platform agents list [--limit <n>] ...`, with one line per flag. */
export function commandUsage(spec: CommandSpec): string {
  const options = optionsOf(spec);
  const flags = Object.entries(spec.options ?? {})
    .map(([n, o]) => {
      const f = `--${n}${o.type === "string" ? ` <${o.value ?? "value"}>` : ""}`;
      return o.required ? f : `[${f}]`;
    })
    .join(" ");
  const line = ["platform", ...spec.path, spec.args ?? "", flags, "[--json]"].filter(Boolean).join(" ");
  return `usage: ${line}\n\n${spec.summary}\n\n${Object.entries(options)
    .map(([n, o]) => optionLine(n, o))
    .join("\n")}`;
}

export function usage(): string {
  const rows = COMMANDS.map((c) => `  ${[...c.path, c.args ?? ""].filter(Boolean).join(" ").padEnd(44)} ${c.summary}`);
  return `platform: the agent platform's command-line client

usage: platform <command> [arguments] [flags]

Commands:
${rows.join("\n")}

Flags of every command:
  --json     machine output (stable field names; errors as {"error": {...}} on stderr)
  -h, --help the command's usage
  --version  the CLI's version (platform --version)

Endpoints come from platform.json in PLATFORM_DATA_DIR (default ./.data), written by the launcher,
or from PLATFORM_IDENTITY_URL, PLATFORM_AGENTS_URL, PLATFORM_ROUTER_URL. PLATFORM_API_KEY may stand
in for a login.

${EXIT_CODES}`;
}

/** The command named by the leading words of argv, and the rest of argv. */
export function findCommand(argv: string[]): { spec?: CommandSpec; group?: string; rest: string[] } {
  const [first, second] = argv;
  if (first === undefined) return { rest: [] };
  if (GROUPS.includes(first)) {
    const explicit = second !== undefined && !second.startsWith("-");
    const spec = explicit
      ? COMMANDS.find((c) => c.path[0] === first && c.path[1] === second)
      : COMMANDS.find((c) => c.path[0] === first && c.isDefault);
    return { spec, group: first, rest: argv.slice(explicit ? 2 : 1) };
  }
  return { spec: COMMANDS.find((c) => c.path.length === 1 && c.path[0] === first), rest: argv.slice(1) };
}

export function groupUsage(group: string): string {
  const rows = COMMANDS.filter((c) => c.path[0] === group).map(
    (c) => `  platform ${[...c.path, c.args ?? ""].filter(Boolean).join(" ").padEnd(40)} ${c.summary}`,
  );
  return `usage:\n${rows.join("\n")}\n\nplatform ${group} <action> --help: the action's flags`;
}
