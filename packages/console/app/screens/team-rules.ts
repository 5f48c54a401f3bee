// What a role may do on the members screen, and the invitation link: plain
// functions (no DOM), unit-tested in src/team-rules.test.ts.

export type Role = "owner" | "member";

export interface RoleRights {
  /** List members and open invitations, read the audit log. */
  viewMembers: boolean;
  invite: boolean;
  changeRoles: boolean;
  removeMembers: boolean;
}

/**
 * The actions identity allows a role (MemberService and AuditService: owners
 * only). The console offers no other; identity still checks every call.
 */
export function roleRights(role: string): RoleRights {
  const owner = role === "owner";
  return { viewMembers: owner, invite: owner, changeRoles: owner, removeMembers: owner };
}

/** How many owners the organization has (the last one can be neither demoted nor removed). */
export function ownersLeft(members: readonly { role: string }[]): number {
  return members.filter((m) => m.role === "owner").length;
}

/**
 * The link an invited person opens: the console's accept screen with the
 * token in the fragment (the fragment is never sent to a server or in a
 * Referer; the screen removes it from the address bar once read).
 */
export function acceptLink(origin: string, token: string): string {
  return `${origin}/#/accept/${encodeURIComponent(token)}`;
}

/** The token of an accept route (`#/accept/<token>`), or undefined. */
export function acceptToken(route: readonly string[]): string | undefined {
  if (route[0] !== "accept" || !route[1]) return undefined;
  try {
    return decodeURIComponent(route[1]);
  } catch {
    return undefined;
  }
}
