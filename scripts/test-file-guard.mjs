// A node:test reporter that prints nothing and bounds a whole test file: run
// directly (`node --test-reporter=spec --test-reporter=<this> file.test.ts`,
// scripts/run-tests.mjs), a file has no `--test` parent to enforce
// --test-timeout, so after TEST_FILE_TIMEOUT_MS this names the tests still
// running and ends the process with status 1 (run-tests.mjs then ends what
// the file started: its process group).
import { Transform } from "node:stream";

const running = new Map();
const timeoutMs = Number(process.env.TEST_FILE_TIMEOUT_MS ?? 0);

if (timeoutMs > 0) {
  setTimeout(() => {
    const names = [...running.values()].map((path) => `  ${path.join(" > ")}`).join("\n");
    process.stderr.write(
      `\n✖ the file timed out after ${timeoutMs} ms${names ? `; still running:\n${names}` : " (no test running)"}\n`,
    );
    process.exit(1);
  }, timeoutMs).unref();
}

/** Tests by position (file, line, column): a dequeue starts one, a complete ends it. */
const path = [];
export default new Transform({
  writableObjectMode: true,
  transform({ type, data }, _encoding, done) {
    if (type === "test:dequeue") {
      path[data.nesting] = data.name;
      running.set(`${data.file}:${data.line}:${data.column}:${data.name}`, path.slice(0, data.nesting + 1));
    } else if (type === "test:complete") {
      running.delete(`${data.file}:${data.line}:${data.column}:${data.name}`);
    }
    done();
  },
});
