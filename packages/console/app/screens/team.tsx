import type { AuditEvent, Invitation, Member } from "@platform/gen/identity/v1/teams_pb";
import { useEffect, useState } from "preact/hooks";
import { ErrorAlert } from "../error-alert.tsx";
import { messageOf, type Platform } from "../platform.ts";
import { acceptLink, ownersLeft, type Role, roleRights } from "./team-rules.ts";

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
  const [copied, setCopied] = useState(false);
  const [error, setError] = useState("");
  const [generation, setGeneration] = useState(0);
  const reload = () => setGeneration((g) => g + 1);

  useEffect(() => {
    if (!orgId || !rights.viewMembers) return;
    platform.members.listMembers({ orgId }).then(
      (r) => setMembers(r.members),
      (e) => setError(messageOf(e)),
    );
    platform.members.listInvitations({ orgId }).then(
      (r) => setInvitations(r.invitations),
      (e) => setError(messageOf(e)),
    );
    platform.audit.listAuditEvents({ orgId, limit: 20 }).then(
      (r) => {
        setEvents(r.items);
        setNext(r.next);
      },
      (e) => setError(messageOf(e)),
    );
  }, [platform, orgId, rights.viewMembers, generation]);

  async function act(what: () => Promise<unknown>) {
    setError("");
    try {
      await what();
      reload();
    } catch (e) {
      setError(messageOf(e));
    }
  }
  async function invite(e: Event) {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const f = new FormData(form);
    const email = String(f.get("email") ?? "").trim();
    await act(async () => {
      const res = await platform.members.createInvitation({ orgId, email, role: String(f.get("role")) });
      // The token is in this answer only (identity keeps its hash): the link is shown once.
      setInvited({ email, link: acceptLink(location.origin, res.token) });
      setCopied(false);
      form.reset();
    });
  }
  async function copy() {
    if (!invited) return;
    try {
      await navigator.clipboard.writeText(invited.link);
      setCopied(true);
    } catch (err) {
      setError(`Copy failed: ${messageOf(err)}`);
    }
  }
  async function more() {
    if (!next) return;
    try {
      const r = await platform.audit.listAuditEvents({ orgId, limit: 20, after: next });
      setEvents([...events, ...r.items]);
      setNext(r.next);
    } catch (e) {
      setError(messageOf(e));
    }
  }

  if (role === "") return <p aria-busy="true">Loading…</p>;
  if (!rights.viewMembers) {
    return (
      <section>
        <h1>{orgName || "Organization"}: members</h1>
        <p data-testid="member-notice">
          You are a <strong>{role}</strong> of this organization. Its owners invite people, change roles and read
          the audit log.
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
      <div class="table-scroll">
        <table data-testid="members">
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Name</th>
              <th scope="col">Role</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {members.map((m) => {
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
            })}
          </tbody>
        </table>
      </div>

      {rights.invite && (
        <>
          <h2>Invitations</h2>
          {invited && (
            <article class="secret" data-testid="invitation-link">
              <p>
                Send this link to <strong>{invited.email}</strong>. It is shown once and works once.
              </p>
              <pre>
                <code data-testid="invite-link">{invited.link}</code>
              </pre>
              <button type="button" onClick={copy}>
                {copied ? "Copied" : "Copy link"}
              </button>{" "}
              <button type="button" class="secondary outline" onClick={() => setInvited(undefined)}>
                Done
              </button>
            </article>
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
          <div class="table-scroll">
            <table data-testid="invitations">
              <thead>
                <tr>
                  <th scope="col">Email</th>
                  <th scope="col">Role</th>
                  <th scope="col">Expires</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {invitations.length === 0 && (
                  <tr>
                    <td colSpan={4}>No open invitations.</td>
                  </tr>
                )}
                {invitations.map((i) => (
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
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}

      <h2>Audit log</h2>
      <div class="table-scroll">
        <table data-testid="audit">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Action</th>
              <th scope="col">Actor</th>
              <th scope="col">Target</th>
            </tr>
          </thead>
          <tbody>
            {events.map((e) => (
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
            ))}
          </tbody>
        </table>
      </div>
      {next && (
        <button type="button" class="secondary" onClick={more}>
          Older events
        </button>
      )}
    </section>
  );
}
