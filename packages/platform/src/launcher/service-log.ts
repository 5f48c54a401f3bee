import { closeSync, fstatSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import type { LogLevel } from "./config.ts";

/** pino's numeric levels for the launcher's names. */
const threshold: Record<LogLevel, number> = { debug: 20, info: 30, warn: 40, error: 50 };
const names: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };
/** Fields every pino line carries, left out of the console's one-line summary. */
const routine = new Set(["level", "time", "pid", "hostname", "name", "msg", "v"]);

/**
 * An append-only log file kept under `maxBytes`: when a write would pass it,
 * the file becomes `<file>.1` (replacing the previous one) and a new one
 * starts, so a service holds at most twice the bound on disk. Owner-only
 * (0600): logs carry user names, session ids and prompts.
 */
export class RotatingFile {
  #fd: number;
  #size: number;

  constructor(
    readonly path: string,
    private readonly maxBytes: number,
  ) {
    this.#fd = openSync(path, "a", 0o600);
    this.#size = fstatSync(this.#fd).size;
  }

  write(line: string): void {
    const bytes = Buffer.from(`${line}\n`);
    if (this.#size > 0 && this.#size + bytes.length > this.maxBytes) {
      closeSync(this.#fd);
      renameSync(this.path, `${this.path}.1`);
      this.#fd = openSync(this.path, "a", 0o600);
      this.#size = 0;
    }
    writeSync(this.#fd, bytes);
    this.#size += bytes.length;
  }

  close(): void {
    closeSync(this.#fd);
  }
}

export type LogRouting = {
  /** Console verbosity (PLATFORM_LOG_LEVEL). */
  level: LogLevel;
  /** `<data dir>/logs`. */
  dir: string;
  maxFileBytes: number;
  /** Values never written anywhere (the owner's password, the key-encryption key), should a service print one. */
  secrets: readonly string[];
  /** Where console lines go (the launcher's stderr). */
  console: (line: string) => void;
};

export function redactor(secrets: readonly string[]): (line: string) => string {
  const values = secrets.filter((s) => s.length >= 8);
  return (line) => values.reduce((l, s) => l.replaceAll(s, "[redacted]"), line);
}

/** The console's form of one line: pino JSON as `LEVEL msg {fields}` if at or above the level, anything else as it is. */
export function consoleLine(raw: string, level: LogLevel): string | undefined {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(raw) as Record<string, unknown>;
  } catch {
    return raw; // a stack trace or a runtime's warning: never hidden
  }
  if (typeof entry !== "object" || entry === null || typeof entry.level !== "number") return raw;
  if (entry.level < threshold[level]) return undefined;
  const rest = Object.fromEntries(Object.entries(entry).filter(([k]) => !routine.has(k)));
  const fields = Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : "";
  return `${names[entry.level] ?? entry.level} ${String(entry.msg ?? "")}${fields}`;
}

/**
 * One service's output: every line into `<dir>/<name>.log` as the service
 * wrote it (minus secrets), and the lines at the console level or above to the
 * console, prefixed with the service's name. Survives restarts: the same
 * file goes on.
 */
export class ServiceLog {
  readonly #file: RotatingFile;
  readonly #redact: (line: string) => string;

  constructor(
    readonly name: string,
    private readonly routing: LogRouting,
  ) {
    mkdirSync(routing.dir, { recursive: true, mode: 0o700 });
    this.#file = new RotatingFile(join(routing.dir, `${name}.log`), routing.maxFileBytes);
    this.#redact = redactor(routing.secrets);
  }

  get path(): string {
    return this.#file.path;
  }

  /** Follows a stream of the service's output line by line (a line split across chunks is joined first). */
  follow(stream: Readable | null | undefined): void {
    if (!stream) return;
    let partial = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) this.line(line);
    });
    stream.on("end", () => {
      if (partial) this.line(partial);
      partial = "";
    });
  }

  line(raw: string): void {
    if (!raw.trim()) return;
    const line = this.#redact(raw);
    this.#file.write(line);
    const shown = consoleLine(line, this.routing.level);
    if (shown !== undefined) this.routing.console(`[${this.name}] ${shown}`);
  }

  close(): void {
    this.#file.close();
  }
}
