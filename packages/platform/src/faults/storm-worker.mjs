// One client process of the login storm (outage-storm-disconnects.test.ts): `count`
// concurrent logins, each on a connection of its own, with distinct unknown
// emails, fired together at `startAt` (epoch ms). Prints one JSON array:
// status (0 for a transport failure), milliseconds, Retry-After, error code.
// Several of these make the storm, so the test's own event loop measures
// the platform and not its own load. With `malformed` as the fifth argument
// the bodies are not JSON: the same endpoint's cheapest answer (400), the
// storm's peer.
import http from "node:http";

const [url, count, prefix, startAt, kind] = process.argv.slice(2);
const target = new URL(url);
const wait = Number(startAt) - Date.now();
if (wait > 0) await new Promise((r) => setTimeout(r, wait));

function login(i) {
  const body = kind === "malformed" ? `{"email": "${prefix}-${i}@example.com"` : JSON.stringify({ email: `${prefix}-${i}@example.com`, password: "not-the-password-42" });
  const started = Date.now();
  return new Promise((resolve) => {
    const req = http.request(
      { host: target.hostname, port: target.port, path: target.pathname, method: "POST", agent: false, timeout: 60_000, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode, ms: Date.now() - started, retryAfter: res.headers["retry-after"] ?? null }));
        res.on("error", (err) => resolve({ status: 0, ms: Date.now() - started, retryAfter: null, error: err.code ?? err.message }));
      },
    );
    req.on("timeout", () => req.destroy(Object.assign(new Error("client timeout"), { code: "CLIENT_TIMEOUT" })));
    req.on("error", (err) => resolve({ status: 0, ms: Date.now() - started, retryAfter: null, error: err.code ?? err.message }));
    req.end(body);
  });
}

const results = await Promise.all(Array.from({ length: Number(count) }, (_, i) => login(i)));
process.stdout.write(JSON.stringify(results));
