// A stand-in service for the supervisor's tests: answers /livez on FAKE_PORT,
// writes pino-shaped lines at each level (and FAKE_SECRET, which must never
// reach a log), and exits at once with code 3 while the file FAKE_CRASH_FILE
// exists, as a service with a broken setting does; with FAKE_IGNORE_TERM
// it does not stop on SIGTERM.
import { existsSync } from "node:fs";
import { createServer } from "node:http";

const line = (level: number, msg: string, extra: Record<string, unknown> = {}) =>
  process.stdout.write(
    `${JSON.stringify({ level, time: Date.now(), pid: process.pid, hostname: "h", name: "fake", ...extra, msg })}\n`,
  );

if (process.env.FAKE_CRASH_FILE && existsSync(process.env.FAKE_CRASH_FILE)) {
  process.stderr.write("fake: start-up failed: a setting is broken\n");
  process.exit(3);
}
line(20, "fake debug detail");
line(30, "fake listening", { port: Number(process.env.FAKE_PORT) });
line(40, "fake warning", { why: "disk almost full" });
line(50, `fake error with ${process.env.FAKE_SECRET ?? "no secret"}`);
process.stderr.write("a plain stderr line\n");
// Bulk output for the rotation test: FAKE_BULK lines of about 100 bytes.
for (let i = 0; i < Number(process.env.FAKE_BULK ?? 0); i++) line(30, `bulk ${i} ${"x".repeat(40)}`);
createServer((_req, res) => res.end("ok")).listen(Number(process.env.FAKE_PORT), "127.0.0.1");
// FAKE_IGNORE_TERM: a service whose stop hangs, for the launcher's grace.
process.on("SIGTERM", () => (process.env.FAKE_IGNORE_TERM ? undefined : process.exit(0)));
