import { ComputeReason, PlatformError } from "@platform/errors";
import { checkPathLimits, quotePath } from "../path-limits.ts";

/**
 * Bounds of ExecCommand's command line, in the spirit of Linux's ARG_MAX.
 *
 * execve refuses one argument or "NAME=value" string over MAX_ARG_STRLEN
 * (32 pages, 128 KiB, its NUL included) and the whole of argv + envp over a quarter of the
 * stack limit (2 MiB with the usual 8 MiB stack), which also has to hold
 * the sandbox's own environment. We take 128 KiB - 1 bytes per string and 1 MiB for
 * command, args and env together (each string counted with its NUL), and at
 * most 16,384 strings: the local driver hands a command to its exec helper
 * in one request of at most 4 MiB and 65,536 fields, and one over that
 * would stop the helper for every sandbox.
 */
export const MAX_ARG_STRING_BYTES = 128 * 1024 - 1;
export const MAX_COMMAND_LINE_BYTES = 1024 * 1024;
export const MAX_COMMAND_LINE_STRINGS = 16_384;

export interface CommandLine {
  command: string;
  args: readonly string[];
  env: Readonly<Record<string, string>>;
}

/** Throws INVALID_ARGUMENT unless the command line is well-formed and within the bounds above. */
export function checkCommandLine({ command, args, env }: CommandLine): void {
  if (!command) throw invalid("command is required");
  if (command.includes("\0") || args.some((a) => a.includes("\0")))
    throw invalid("command and args must not contain NUL bytes");
  checkPathLimits(command, "command");
  const names = Object.keys(env);
  if (args.length + names.length > MAX_COMMAND_LINE_STRINGS) {
    throw tooLong(`args and env hold ${args.length + names.length} strings; at most ${MAX_COMMAND_LINE_STRINGS}`);
  }
  let total = Buffer.byteLength(command) + 1;
  for (const [i, arg] of args.entries()) {
    const bytes = Buffer.byteLength(arg);
    if (bytes > MAX_ARG_STRING_BYTES) throw tooLong(`args[${i}] is ${bytes} bytes; at most ${MAX_ARG_STRING_BYTES}`);
    total += bytes + 1;
  }
  for (const name of names) {
    const value = env[name] ?? "";
    if (!name || name.includes("=") || name.includes("\0") || value.includes("\0")) {
      throw invalid(`invalid environment variable ${quotePath(name)}`);
    }
    const bytes = Buffer.byteLength(name) + 1 + Buffer.byteLength(value);
    if (bytes > MAX_ARG_STRING_BYTES) {
      throw tooLong(
        `environment variable ${quotePath(name)} is ${bytes} bytes as NAME=value; at most ${MAX_ARG_STRING_BYTES}`,
      );
    }
    total += bytes + 1;
  }
  if (total > MAX_COMMAND_LINE_BYTES) {
    throw tooLong(`command, args and env are ${total} bytes; at most ${MAX_COMMAND_LINE_BYTES}`);
  }
}

function invalid(message: string): PlatformError {
  return PlatformError.invalidArgument(message, ComputeReason.invalidArgument);
}

function tooLong(message: string): PlatformError {
  return PlatformError.invalidArgument(message, ComputeReason.argumentsTooLong);
}
