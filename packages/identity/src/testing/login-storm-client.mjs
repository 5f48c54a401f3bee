// One process of a login storm (login-storm.db.test.ts): fires `count`
// logins at once over up to `sockets` keep-alive connections, each with its
// own email and X-Forwarded-For address (many clients behind one trusted
// proxy), and prints one JSON line: every answer's status, Retry-After and
// milliseconds from its start. Plain JavaScript on node:http so a storm
// process starts in tens of milliseconds and spends little CPU per request.
import http from "node:http";

const { url, count, sockets, prefix, password } = JSON.parse(process.argv[2]);
const target = new URL(url);
const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });

function login(i) {
  const body = JSON.stringify({ email: `${prefix}-${i}@storm.example.com`, password });
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.request(
      {
        agent,
        host: target.hostname,
        port: target.port,
        method: "POST",
        path: "/v1/auth/login",
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          "x-forwarded-for": `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
        },
      },
      (res) => {
        res.resume();
        res.on("end", () =>
          resolve({ status: res.statusCode, retryAfter: res.headers["retry-after"] ?? null, ms: performance.now() - started }),
        );
      },
    );
    req.on("error", (err) => resolve({ status: 0, error: err.code ?? err.message, ms: performance.now() - started }));
    req.end(body);
  });
}

const results = await Promise.all(Array.from({ length: count }, (_, i) => login(i)));
agent.destroy();
process.stdout.write(`${JSON.stringify(results)}\n`);
