// The signed-in user's own account (issue 19 item 3): who they are, their
// name, their password. Changing the password revokes every other session of
// theirs (identity's ChangePassword); the new pair it answers becomes the
// CLI's login, so this one goes on.
import { createInterface } from "node:readline";
import { type Context, type Flags, need } from "./commands.ts";
import { saveCredentials } from "./credentials.ts";
import { CliError } from "./endpoints.ts";
import type { CommandSpec } from "./spec.ts";

type User = { id: string; email: string; name: string; created_at?: string };
type Pair = { access_token: string; refresh_token: string };

export const ACCOUNT_COMMANDS: CommandSpec[] = [
  { path: ["users", "me"], summary: "the logged-in user (as whoami)", isDefault: true },
  {
    path: ["users", "update"],
    summary: "change your name",
    options: { name: { type: "string", value: "name", help: "your new name", required: true } },
  },
  {
    path: ["users", "password"],
    summary: "change your password; your other sessions are signed out",
    options: {
      "current-password": {
        type: "string",
        value: "password",
        help: "default: PLATFORM_PASSWORD, else the first line on stdin",
      },
      "new-password": {
        type: "string",
        value: "password",
        help: "default: PLATFORM_NEW_PASSWORD, else the next line on stdin",
      },
    },
  },
];

const str = (flags: Flags, name: string): string | undefined =>
  typeof flags[name] === "string" ? (flags[name] as string) : undefined;

/** Lines of stdin, read once and handed out in order (both passwords may come from it). */
function stdinLines(): () => Promise<string | undefined> {
  let it: AsyncIterator<string> | undefined;
  return async () => {
    it ??= createInterface({ input: process.stdin })[Symbol.asyncIterator]();
    const r = await it.next();
    return r.done ? undefined : r.value;
  };
}

async function secret(
  flag: string | undefined,
  envValue: string | undefined,
  prompt: string,
  next: () => Promise<string | undefined>,
  what: string,
): Promise<string> {
  if (flag) return flag;
  if (envValue) return envValue;
  if (process.stdin.isTTY) process.stderr.write(prompt);
  const line = await next();
  if (line === undefined || line === "") throw new CliError(`no ${what} given`);
  return line;
}

type Handler = (ctx: Context, args: string[], flags: Flags) => Promise<unknown>;

export const accountHandlers: Record<string, Handler> = {
  "users me": async (ctx) => {
    const client = ctx.client();
    const me = await client.request<User>("GET", `${client.endpoints.identity}/v1/users/me`);
    if (ctx.io.json) return ctx.io.value(me);
    ctx.io.line(`${me.email} (${me.name}) ${me.id}`);
  },
  "users update": async (ctx, _args, flags) => {
    const client = ctx.client();
    const me = await client.request<User>("PATCH", `${client.endpoints.identity}/v1/users/me`, {
      body: { name: need(flags, "name") },
      idempotent: true,
    });
    if (ctx.io.json) return ctx.io.value(me);
    ctx.io.line(`your name is now ${me.name}`);
  },
  "users password": async (ctx, _args, flags) => {
    const client = ctx.client();
    const creds = client.credentials;
    if (!creds || client.env.PLATFORM_API_KEY)
      throw new CliError("changing the password needs a login (platform login), not an API key", "not_logged_in");
    const next = stdinLines();
    const current = await secret(
      str(flags, "current-password"),
      client.env.PLATFORM_PASSWORD,
      "current password: ",
      next,
      "current password (--current-password, PLATFORM_PASSWORD or stdin)",
    );
    const fresh = await secret(
      str(flags, "new-password"),
      client.env.PLATFORM_NEW_PASSWORD,
      "new password: ",
      next,
      "new password (--new-password, PLATFORM_NEW_PASSWORD or stdin)",
    );
    const pair = await client.request<Pair>("POST", `${client.endpoints.identity}/v1/users/me/password`, {
      body: { current_password: current, new_password: fresh },
      idempotent: true,
    });
    saveCredentials(
      client.endpoints.identity,
      { email: creds.email, accessToken: pair.access_token, refreshToken: pair.refresh_token },
      client.env,
    );
    if (ctx.io.json) return ctx.io.value({ changed: true, otherSessionsRevoked: true });
    ctx.io.line("password changed; your other sessions are signed out");
  },
};
