import { createHmac, timingSafeEqual } from "node:crypto";
import { isUuid } from "@platform/errors";

/**
 * A sandbox's credential for the shared egress proxy (Kubernetes): the
 * username is its id, the password an HMAC of the id under a key compute and
 * the proxy share. The proxy stores nothing per sandbox to check it, a
 * sandbox learns only its own (it is in its environment), and no sandbox can
 * make another's without the key. Chosen over identifying a pod by its
 * source address: no API access for the proxy, no race when a deleted pod's
 * address is given to another, and it holds through any SNAT.
 */
export function proxyPassword(key: Buffer, sandboxId: string): string {
  return createHmac("sha256", key).update(`sandbox-egress:${sandboxId}`).digest("base64url");
}

/** The sandbox the credential names, or undefined when the password is not its. */
export function verifyProxyCredential(key: Buffer, username: string, password: string): string | undefined {
  // Sandbox ids are lower-case (as compute makes them).
  if (!isUuid(username) || username !== username.toLowerCase()) return undefined;
  const want = Buffer.from(proxyPassword(key, username));
  const got = Buffer.from(password);
  return got.length === want.length && timingSafeEqual(got, want) ? username : undefined;
}

/**
 * The proxy variables of a Kubernetes sandbox (both spellings, as the local
 * driver's): the shared proxy's Service, with the sandbox's credential.
 */
export function sharedProxyEnv(
  proxyHost: string,
  port: number,
  sandboxId: string,
  key: Buffer,
): Record<string, string> {
  const cred = `${sandboxId}:${proxyPassword(key, sandboxId)}`;
  const host = proxyHost.includes(":") ? `[${proxyHost}]` : proxyHost;
  const env: Record<string, string> = {
    HTTP_PROXY: `http://${cred}@${host}:${port}`,
    HTTPS_PROXY: `http://${cred}@${host}:${port}`,
    ALL_PROXY: `socks5h://${cred}@${host}:${port}`,
    NO_PROXY: "localhost,127.0.0.1,::1",
  };
  for (const [k, v] of Object.entries({ ...env })) env[k.toLowerCase()] = v;
  return env;
}
