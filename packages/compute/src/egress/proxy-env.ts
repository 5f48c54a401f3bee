/** The port a sandbox reaches its egress proxy on (its own loopback: no other sandbox sees it). */
export const SANDBOX_PROXY_PORT = 3128;

/**
 * The proxy variables every exec of a sandbox with a policy gets, both
 * spellings (curl reads only the lower-case http_proxy; Python, Go and npm
 * read either).
 */
export function proxyEnv(port = SANDBOX_PROXY_PORT): Record<string, string> {
  const http = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    HTTP_PROXY: http,
    HTTPS_PROXY: http,
    ALL_PROXY: `socks5h://127.0.0.1:${port}`,
    NO_PROXY: "localhost,127.0.0.1,::1",
  };
  for (const [k, v] of Object.entries({ ...env })) env[k.toLowerCase()] = v;
  return env;
}
