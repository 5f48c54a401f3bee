import type { AuditEvent, Invitation, Member } from "@platform/gen/identity/v1/teams_pb";
import { useEffect, useState } from "preact/hooks";
import { useAction } from "../action.tsx";
import { ErrorAlert } from "../error-alert.tsx";
import type { Platform } from "../platform.ts";
import { type SecretKind, ShownOnce } from "../shown-once.tsx";
import { Table, type TableHead } from "../table.tsx";
import { acceptLink, ownersLeft, type Role, roleRights } from "./team-rules.ts";

const INVITE_LINK: SecretKind = { testId: "invitation-link", valueTestId: "invite-link", copyLabel: "Copy link" };
const MEMBER_TABLE: TableHead = { testId: "members", columns: ["Email", "Name", "Role"], actions: true };
const INVITATION_TABLE: TableHead = {
  testId: "invitations",
  columns: ["Email", "Role", "Expires"],
  actions: true,
  empty: "No open invitations.",
};
const AUDIT_TABLE: TableHead = { testId: "audit", columns: ["When", "Action", "Actor", "Target"] };

const when = (t?: { seconds: bigint }) => (t ? new Date(Number(t.seconds) * 1000).toLocaleString() : "");

/**
 * Members, invitations and the audit log of the organization. What the
 * signed-in user's role may not do is not offered (identity refuses it
 * anyway: owners only, and never the last owner's demotion or removal).
 */
export function TeamScreen({
  platform,
  orgId,
  orgName,
  role,
  userId,
}: {
  platform: Platform;
  orgId: string;
  orgName: string;
  /** The signed-in user's role in the organization ("" while unknown). */
  role: Role | "";
  userId: string;
}) {
  const rights = roleRights(role);
  const [members, setMembers] = useState<Member[]>([]);
  const [invitations, setInvitations] = useState<Invitation[]>([]);
  const [events, setEvents] = useState<AuditEvent[]>([]);
  const [next, setNext] = useState<string>();
  const [invited, setInvited] = useState<{ email: string; link: string }>();
  const { error, setError, fail, attempt, submit } = useAction();
  const [generation, setGeneration] = useState(0);
  const reload = () => setGeneration((g) => g + 1);

  useEffect(() => {
    if (!orgId || !rights.viewMembers) return;
    platform.members.listMembers({ orgId }).then((r) => setMembers(r.members), fail);
    platform.members.listInvitations({ orgId }).then((r) => setInvitations(r.invitations), fail);
    platform.audit.listAuditEvents({ orgId, limit: 20 }).then((r) => {
      setEvents(r.items);
      setNext(r.next);
    }, fail);
  }, [platform, orgId, rights.viewMembers, generation]);

  const act = (what: () => Promise<unknown>) =>
    attempt(async () => {
      await what();
      reload();
    });
  const invite = submit(async (f, form) => {
    const email = String(f.get("email") ?? "").trim();
    const res = await platform.members.createInvitation({ orgId, email, role: String(f.get("role")) });
    // The token is in this answer only (identity keeps its hash): the link is shown once.
    setInvited({ email, link: acceptLink(location.origin, res.token) });
    form.reset();
    reload();
  });
  const more = () =>
    attempt(async () => {
      if (!next) return;
      const r = await platform.audit.listAuditEvents({ orgId, limit: 20, after: next });
      setEvents([...events, ...r.items]);
      setNext(r.next);
    });

  if (role === "") return <p aria-busy="true">Loading…</p>;
  if (!rights.viewMembers) {
    return (
      <section>
        <h1>{orgName || "Organization"}: members</h1>
        <p data-testid="member-notice">
          You are a <strong>{role}</strong> of this organization. Its owners invite people, change roles and read the
          audit log.
        </p>
      </section>
    );
  }
  const owners = ownersLeft(members);
  const who = (id: string) => members.find((m) => m.userId === id)?.email ?? (id ? id.slice(0, 8) : "—");
  return (
    <section>
      <h1>{orgName || "Organization"}: members and audit log</h1>
      <ErrorAlert message={error} />
      <h2>Members</h2>
      <Table {...MEMBER_TABLE} rows={members}>
        {(m) => {
          // The last owner can be neither demoted nor removed (409 last_owner).
          const lastOwner = m.role === "owner" && owners <= 1;
          return (
            <tr key={m.userId} data-testid={`member-${m.email}`}>
              <td>
                {m.email}
                {m.userId === userId && <small class="muted"> (you)</small>}
              </td>
              <td>{m.name}</td>
              <td>
                {rights.changeRoles ? (
                  <select
                    aria-label={`Role of ${m.email}`}
                    value={m.role}
                    disabled={lastOwner}
                    title={lastOwner ? "The last owner keeps the role" : undefined}
                    onChange={(e) => {
                      const role = (e.target as HTMLSelectElement).value;
                      void act(() => platform.members.updateMember({ orgId, userId: m.userId, role }));
                    }}
                  >
                    <option value="owner">owner</option>
                    <option value="member">member</option>
                  </select>
                ) : (
                  m.role
                )}
              </td>
              <td>
                {rights.removeMembers && (
                  <button
                    type="button"
                    class="small secondary"
                    disabled={lastOwner}
                    onClick={() => {
                      if (!confirm(`Remove ${m.email} from ${orgName}? Their sessions and keys here stop working.`))
                        return;
                      void act(() => platform.members.removeMember({ orgId, userId: m.userId }));
                    }}
                  >
                    Remove {m.email}
                  </button>
                )}
              </td>
            </tr>
          );
        }}
      </Table>

      {rights.invite && (
        <>
          <h2>Invitations</h2>
          {invited && (
            <ShownOnce {...INVITE_LINK} value={invited.link} onDone={() => setInvited(undefined)} onError={setError}>
              Send this link to <strong>{invited.email}</strong>. It is shown once and works once.
            </ShownOnce>
          )}
          <form onSubmit={invite} class="grid" aria-label="Invite someone">
            <label>
              Email to invite
              <input name="email" type="email" required maxLength={320} autocomplete="off" />
            </label>
            <label>
              Role
              <select name="role" aria-label="Role of the invited person">
                <option value="member">member</option>
                <option value="owner">owner</option>
              </select>
            </label>
            <div>
              <button type="submit">Invite</button>
            </div>
          </form>
          <Table {...INVITATION_TABLE} rows={invitations}>
            {(i) => (
              <tr key={i.id}>
                <td>{i.email}</td>
                <td>{i.role}</td>
                <td>{when(i.expiresAt)}</td>
                <td>
                  <button
                    type="button"
                    class="small secondary"
                    onClick={() => act(() => platform.members.revokeInvitation({ orgId, id: i.id }))}
                  >
                    Revoke invitation for {i.email}
                  </button>
                </td>
              </tr>
            )}
          </Table>
        </>
      )}

      <h2>Audit log</h2>
      <Table {...AUDIT_TABLE} rows={events}>
        {(e) => (
          <tr key={e.id}>
            <td>{when(e.createdAt)}</td>
            <td>
              <code>{e.action}</code>
            </td>
            <td>{who(e.actorUserId)}</td>
            <td>
              {e.targetType} {e.targetId.slice(0, 8)}
            </td>
          </tr>
        )}
      </Table>
      {next && (
        <button type="button" class="secondary" onClick={more}>
          Older events
        </button>
      )}
    </section>
  );
}
