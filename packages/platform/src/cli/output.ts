import { writeSync } from "node:fs";

/** Where a command writes: human lines, or (with --json) JSON documents. */
export type Output = {
  /** --json was given: commands print JSON through `json` only. */
  readonly json: boolean;
  line(text: string): void;
  write(text: string): void;
  /** Diagnostics and progress: stderr. */
  err(text: string): void;
  /** One JSON value on its own line of stdout. */
  value(value: unknown): void;
};

/**
 * The process's stdout and stderr. Writes are synchronous (a reader that
 * went away, as `| head` does, shows up here as EPIPE, not as an 'error'
 * event later), and EPIPE ends the process quietly with status 0: the
 * reader has all it wanted, and what was written before it left stays
 * written, in order.
 */
export function processOutput(json: boolean): Output {
  const write = writeAll;
  return {
    json,
    line: (t) => write(1, `${t}\n`),
    write: (t) => write(1, t),
    err: (t) => write(2, `${t}\n`),
    value: (v) => write(1, `${JSON.stringify(v)}\n`),
  };
}

/** All of `text`, also to a non-blocking descriptor (a pipe another process made) that is full for a moment. */
function writeAll(fd: number, text: string): void {
  let rest = Buffer.from(text);
  const deadline = Date.now() + 30_000;
  while (rest.length > 0) {
    try {
      rest = rest.subarray(writeSync(fd, rest));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EPIPE") process.exit(0);
      if (code !== "EAGAIN" || Date.now() > deadline) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
}

/** Guards the asynchronous stream objects too (a library writing to process.stdout). */
export function quietOnEpipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EPIPE") process.exit(0);
      throw err;
    });
  }
}
