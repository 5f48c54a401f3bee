// The team commands (issue 19): members and invitations of the current
// organization, the user's organizations and switching between them.
import { isUuid } from "@platform/errors";
import { type Context, type Flags, need } from "./commands.ts";
import { saveCredentials } from "./credentials.ts";
import { CliError, UsageError } from "./endpoints.ts";
import type { PlatformClient } from "./http.ts";
import type { CommandSpec } from "./spec.ts";

type Member = { user_id: string; email: string; name: string; role: string; created_at: string };
type Invitation = { id: string; org_id: string; email: string; role: string; expires_at: string };
type Org = { id: string; name: string; slug: string };
type MyOrg = { org: Org; role: string; joined_at: string };
type Pair = { access_token: string; refresh_token: string };

const str = (flags: Flags, name: string): string | undefined =>
  typeof flags[name] === "string" ? (flags[name] as string) : undefined;

const orgFlag = {
  org: { type: "string" as const, value: "org id", help: "the organization (default: the one you are signed in to)" },
};

export const TEAM_COMMANDS: CommandSpec[] = [
  { path: ["members", "list"], summary: "the organization's members (owners only)", options: orgFlag, isDefault: true },
  {
    path: ["members", "invite"],
    summary: "invite a person; the single-use invitation token is printed first, once",
    options: {
      email: { type: "string", value: "email", help: "who is invited", required: true },
      role: { type: "string", value: "owner|member", help: "their role (default member)" },
      ...orgFlag,
    },
  },
  {
    path: ["members", "role"],
    summary: "change a member's role (the last owner cannot be demoted)",
    args: "<user id|email>",
    min: 1,
    max: 1,
    options: { role: { type: "string", value: "owner|member", help: "the new role", required: true }, ...orgFlag },
  },
  {
    path: ["members", "remove"],
    summary: "remove a member: their sessions and keys in the organization stop at once",
    args: "<user id|email>",
    min: 1,
    max: 1,
    options: orgFlag,
  },
  { path: ["invitations", "list"], summary: "pending invitations (owners only)", options: orgFlag, isDefault: true },
  {
    path: ["invitations", "revoke"],
    summary: "revoke a pending invitation",
    args: "<invitation id>",
    min: 1,
    max: 1,
    options: orgFlag,
  },
  {
    path: ["invitations", "accept"],
    summary: "accept an invitation and sign in; the password comes from --password, PLATFORM_PASSWORD or stdin",
    args: "<token>",
    min: 1,
    max: 1,
    options: {
      password: {
        type: "string",
        value: "password",
        help: "a new account's password, or your current one if you have an account",
      },
      name: { type: "string", value: "name", help: "a new account's name" },
      email: { type: "string", value: "email", help: "checked against the invitation's" },
    },
  },
  { path: ["orgs", "list"], summary: "your organizations (* marks the current one)", isDefault: true },
  {
    path: ["orgs", "create"],
    summary: "a new organization; you are its owner",
    options: {
      name: { type: "string", value: "name", help: "its name", required: true },
      slug: { type: "string", value: "slug", help: "unique (default: from the name)" },
    },
  },
  {
    path: ["orgs", "switch"],
    summary: "sign in to another of your organizations (no password)",
    args: "<org id|slug>",
    min: 1,
    max: 1,
  },
];

/** The org the stored session is in (its JWT's org_id claim); --org wins; an API key needs --org. */
export function currentOrg(client: PlatformClient, flags: Flags = {}): string {
  const given = str(flags, "org");
  if (given) return given;
  const token = client.env.PLATFORM_API_KEY ? undefined : client.credentials?.accessToken;
  if (!token) throw new CliError("which organization? give --org <org id> (or log in)", "no_org");
  try {
    return (JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString()) as { org_id: string }).org_id;
  } catch {
    throw new CliError("the stored session names no organization: give --org <org id>", "no_org");
  }
}

const orgPath = (client: PlatformClient, org: string) =>
  `${client.endpoints.identity}/v1/orgs/${encodeURIComponent(org)}`;

/** A member by user id or by email. */
async function resolveMember(client: PlatformClient, org: string, ref: string): Promise<Member> {
  const members = await client.request<Member[]>("GET", `${orgPath(client, org)}/members`);
  const hit = members.find((m) =>
    isUuid(ref) ? m.user_id === ref.toLowerCase() : m.email.toLowerCase() === ref.toLowerCase(),
  );
  if (!hit) throw new UsageError(`no member ${ref} in organization ${org}`);
  return hit;
}

/** Stores a new session (after accepting, switching) as the CLI's login. */
async function signIn(client: PlatformClient, pair: Pair): Promise<string> {
  const me = await fetch(`${client.endpoints.identity}/v1/users/me`, {
    headers: { authorization: `Bearer ${pair.access_token}` },
  });
  const email = me.ok ? ((await me.json()) as { email: string }).email : (client.credentials?.email ?? "");
  saveCredentials(
    client.endpoints.identity,
    { email, accessToken: pair.access_token, refreshToken: pair.refresh_token },
    client.env,
  );
  return email;
}

type Handler = (ctx: Context, args: string[], flags: Flags) => Promise<unknown>;

/** The handlers of TEAM_COMMANDS, by command words; `readPassword` is the CLI's (flag, PLATFORM_PASSWORD, stdin). */
export function teamHandlers(readPassword: (flag: string | undefined) => Promise<string>): Record<string, Handler> {
  return {
    "members list": async (ctx, _args, flags) => {
      const client = ctx.client();
      const members = await client.request<Member[]>("GET", `${orgPath(client, currentOrg(client, flags))}/members`);
      if (ctx.io.json) return ctx.io.value(members);
      for (const m of members) ctx.io.line(`${m.user_id}  ${m.role.padEnd(6)}  ${m.email}  ${m.name}`);
    },
    "members invite": async (ctx, _args, flags) => {
      const client = ctx.client();
      const body = { email: need(flags, "email"), role: str(flags, "role") ?? "member" };
      const res = await client.request<{ invitation: Invitation; token: string }>(
        "POST",
        `${orgPath(client, currentOrg(client, flags))}/invitations`,
        {
          body,
          idempotent: true,
        },
      );
      if (ctx.io.json) return ctx.io.value({ token: res.token, ...res.invitation });
      // The token first, before anything else can fail: it is shown once.
      ctx.io.line(`token: ${res.token}`);
      ctx.io.line(
        `invited ${res.invitation.email} as ${res.invitation.role} (invitation ${res.invitation.id}, expires ${res.invitation.expires_at})`,
      );
      ctx.io.err("give them the token: platform invitations accept <token> --password <password>");
    },
    "members role": async (ctx, args, flags) => {
      const client = ctx.client();
      const org = currentOrg(client, flags);
      const target = await resolveMember(client, org, args[0]!);
      const m = await client.request<Member>("PATCH", `${orgPath(client, org)}/members/${target.user_id}`, {
        body: { role: need(flags, "role") },
        idempotent: true,
      });
      if (ctx.io.json) return ctx.io.value(m);
      ctx.io.line(`${m.email} is now ${m.role}`);
    },
    "members remove": async (ctx, args, flags) => {
      const client = ctx.client();
      const org = currentOrg(client, flags);
      const target = await resolveMember(client, org, args[0]!);
      await client.request("DELETE", `${orgPath(client, org)}/members/${target.user_id}`, { idempotent: true });
      if (ctx.io.json) return ctx.io.value({ removed: target.user_id, email: target.email });
      ctx.io.line(`removed ${target.email}`);
    },
    "invitations list": async (ctx, _args, flags) => {
      const client = ctx.client();
      const list = await client.request<Invitation[]>(
        "GET",
        `${orgPath(client, currentOrg(client, flags))}/invitations`,
      );
      if (ctx.io.json) return ctx.io.value(list);
      if (list.length === 0) ctx.io.err("no pending invitations");
      for (const i of list) ctx.io.line(`${i.id}  ${i.role.padEnd(6)}  ${i.email}  expires ${i.expires_at}`);
    },
    "invitations revoke": async (ctx, args, flags) => {
      const client = ctx.client();
      await client.request(
        "POST",
        `${orgPath(client, currentOrg(client, flags))}/invitations/${encodeURIComponent(args[0]!)}/revoke`,
        { idempotent: true },
      );
      if (ctx.io.json) return ctx.io.value({ revoked: args[0] });
      ctx.io.line(`revoked invitation ${args[0]}`);
    },
    "invitations accept": async (ctx, args, flags) => {
      const client = ctx.client();
      const password = await readPassword(str(flags, "password"));
      const pair = await client.request<Pair>("POST", `${client.endpoints.identity}/v1/invitations/accept`, {
        auth: false,
        body: { token: args[0], password, name: str(flags, "name") ?? "", email: str(flags, "email") ?? "" },
      });
      const email = await signIn(client, pair);
      if (ctx.io.json) return ctx.io.value({ email, loggedIn: true });
      ctx.io.line(`invitation accepted: logged in as ${email}`);
    },
    "orgs list": async (ctx) => {
      const client = ctx.client();
      const orgs = await client.request<MyOrg[]>("GET", `${client.endpoints.identity}/v1/users/me/orgs`);
      let current: string | undefined;
      try {
        current = currentOrg(client);
      } catch {
        current = undefined;
      }
      if (ctx.io.json) return ctx.io.value(orgs.map((o) => ({ ...o, current: o.org.id === current })));
      for (const o of orgs)
        ctx.io.line(
          `${o.org.id === current ? "*" : " "} ${o.org.id}  ${o.org.slug}  ${o.role.padEnd(6)}  ${o.org.name}`,
        );
    },
    "orgs create": async (ctx, _args, flags) => {
      const client = ctx.client();
      const org = await client.request<Org>("POST", `${client.endpoints.identity}/v1/orgs`, {
        body: { name: need(flags, "name"), slug: str(flags, "slug") ?? "" },
        idempotent: true,
      });
      if (ctx.io.json) return ctx.io.value(org);
      ctx.io.line(`created organization ${org.id} (${org.slug}); platform orgs switch ${org.slug} to use it`);
    },
    "orgs switch": async (ctx, args) => {
      const client = ctx.client();
      const ref = args[0]!;
      const orgs = await client.request<MyOrg[]>("GET", `${client.endpoints.identity}/v1/users/me/orgs`);
      const hit = orgs.find((o) => o.org.id === ref.toLowerCase() || o.org.slug === ref);
      if (!hit) throw new UsageError(`you are not a member of an organization ${ref}`);
      const pair = await client.request<Pair>("POST", `${client.endpoints.identity}/v1/auth/switch-org`, {
        body: { org_id: hit.org.id, x_device_label: "platform-cli" },
        idempotent: true,
      });
      await signIn(client, pair);
      if (ctx.io.json) return ctx.io.value({ org: hit.org, role: hit.role });
      ctx.io.line(`now in ${hit.org.name} (${hit.org.slug}) as ${hit.role}`);
    },
  };
}
