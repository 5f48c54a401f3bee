import type { User } from "@platform/client";
import type { MyOrg } from "@platform/gen/identity/v1/teams_pb";
import { useEffect, useMemo, useState } from "preact/hooks";
import { claims, connect, messageOf, type Platform, restoredTokens, storeTokens, tokensOf } from "./platform.ts";
import { go, useRoute } from "./route.ts";
import { AcceptScreen } from "./screens/accept.tsx";
import { AgentScreen, AgentsScreen } from "./screens/agents.tsx";
import { ChatScreen } from "./screens/chat.tsx";
import { KeysScreen } from "./screens/keys.tsx";
import { Login } from "./screens/login.tsx";
import { SessionScreen } from "./screens/session.tsx";
import { TeamScreen } from "./screens/team.tsx";
import { acceptToken, type Role } from "./screens/team-rules.ts";
import { UsageScreen } from "./screens/usage.tsx";
import { ErrorAlert } from "./error-alert.tsx";

export function App() {
  const [generation, setGeneration] = useState(0);
  const [signedIn, setSignedIn] = useState(restoredTokens() !== undefined);
  // A new set of clients after sign-in and after a switch of organization.
  const platform = useMemo(() => connect(restoredTokens(), () => setSignedIn(false)), [generation, signedIn]);
  const route = useRoute();
  // An invitation's link: its token is read once and taken out of the address bar (and history).
  const [invitation, setInvitation] = useState(() => acceptToken(route));
  useEffect(() => {
    const token = acceptToken(route);
    if (!token) return;
    setInvitation(token);
    history.replaceState(null, "", "#/accept");
  }, [route]);
  if (route[0] === "accept") {
    return (
      <AcceptScreen
        platform={platform}
        token={invitation}
        signedIn={signedIn && platform.client.tokens !== undefined}
        onAccepted={(tokens) => {
          storeTokens(tokens);
          location.hash = "#/agents";
          setSignedIn(true);
          setGeneration((g) => g + 1);
        }}
      />
    );
  }
  if (!signedIn || !platform.client.tokens) {
    return (
      <Login
        platform={platform}
        onSignedIn={(tokens) => {
          storeTokens(tokens);
          setSignedIn(true);
          setGeneration((g) => g + 1);
        }}
      />
    );
  }
  return <Shell key={generation} platform={platform} onOrgSwitched={() => setGeneration((g) => g + 1)} />;
}

const NAV = [
  ["agents", "Agents"],
  ["chat", "Chat"],
  ["usage", "Usage"],
  ["keys", "API keys"],
  ["team", "Members & audit"],
] as const;

function Shell({ platform, onOrgSwitched }: { platform: Platform; onOrgSwitched: () => void }) {
  const route = useRoute();
  const [me, setMe] = useState<User>();
  const [orgs, setOrgs] = useState<MyOrg[]>([]);
  const [error, setError] = useState("");
  useEffect(() => {
    platform.client.me().then(setMe, (e) => setError(messageOf(e)));
    platform.teams.listMyOrgs({}).then(
      (r) => setOrgs(r.orgs),
      (e) => setError(messageOf(e)),
    );
  }, [platform]);
  const orgId = platform.orgId();
  const org = orgs.find((o) => o.org?.id === orgId);

  async function switchOrg(id: string) {
    try {
      const res = await platform.teams.switchOrg({ orgId: id, xDeviceLabel: "web console" });
      storeTokens(tokensOf(res.token!));
      onOrgSwitched();
    } catch (e) {
      setError(messageOf(e));
    }
  }
  async function signOut() {
    try {
      await platform.client.logout();
    } finally {
      storeTokens(undefined);
      location.hash = "";
      location.reload();
    }
  }

  const [section = "agents", ...rest] = route;
  return (
    <>
      <header class="container-fluid topbar">
        <nav aria-label="Main">
          <ul>
            <li>
              <strong>Agent platform</strong>
            </li>
          </ul>
          <ul class="links">
            {NAV.map(([path, label]) => (
              <li key={path}>
                <a href={`#/${path}`} aria-current={section === path ? "page" : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="whoami" data-testid="whoami">
          <span>
            Signed in as <strong>{me?.email ?? "…"}</strong>
          </span>
          <label>
            <span class="visually-hidden">Organization</span>
            <select
              aria-label="Organization"
              value={orgId}
              onChange={(e) => switchOrg((e.target as HTMLSelectElement).value)}
            >
              {orgs.map((o) => (
                <option key={o.org?.id} value={o.org?.id}>
                  {o.org?.name} ({o.role})
                </option>
              ))}
            </select>
          </label>
          <button type="button" class="secondary outline" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main class="container">
        <ErrorAlert message={error} />
        {section === "agents" && rest[0] === undefined && <AgentsScreen platform={platform} />}
        {section === "agents" && rest[0] !== undefined && <AgentScreen platform={platform} id={rest[0]} />}
        {section === "chat" && <ChatScreen platform={platform} agentId={rest[0]} sessionId={rest[1]} />}
        {section === "sessions" && rest[0] && <SessionScreen platform={platform} id={rest[0]} />}
        {section === "keys" && <KeysScreen platform={platform} />}
        {section === "usage" && <UsageScreen platform={platform} />}
        {section === "team" && (
          <TeamScreen
            platform={platform}
            orgId={orgId}
            orgName={org?.org?.name ?? ""}
            role={(org?.role ?? "") as Role | ""}
            userId={claims(platform.client.tokens?.accessToken)?.sub ?? ""}
          />
        )}
      </main>
    </>
  );
}

export { go };
