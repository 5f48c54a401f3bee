import type { AuditEvent, Member } from "@platform/gen/identity/v1/teams_pb";
import { useEffect, useState } from "preact/hooks";
import { messageOf, type Platform } from "../platform.ts";
import { ErrorAlert } from "../error-alert.tsx";

export function TeamScreen({ platform, orgId, orgName }: { platform: Platform; orgId: string; orgName: string }) {
  const [members, setMembers] = useState<Member[]>([]);
  const [events, setEvents] = useState<AuditEvent[]>([]);
  const [next, setNext] = useState<string>();
  const [error, setError] = useState("");
  useEffect(() => {
    if (!orgId) return;
    platform.members.listMembers({ orgId }).then(
      (r) => setMembers(r.members),
      (e) => setError(messageOf(e)),
    );
    platform.audit.listAuditEvents({ orgId, limit: 20 }).then(
      (r) => {
        setEvents(r.items);
        setNext(r.next);
      },
      (e) => setError(messageOf(e)),
    );
  }, [platform, orgId]);
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
            </tr>
          </thead>
          <tbody>
            {members.map((m) => (
              <tr key={m.userId}>
                <td>{m.email}</td>
                <td>{m.name}</td>
                <td>{m.role}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
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
                <td>{e.createdAt ? new Date(Number(e.createdAt.seconds) * 1000).toLocaleString() : ""}</td>
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
