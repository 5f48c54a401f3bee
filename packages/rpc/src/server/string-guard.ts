import { type DescMessage, type Message, ScalarType } from "@bufbuild/protobuf";
import { type ReflectMessage, reflect } from "@bufbuild/protobuf/reflect";

/** Why a string was refused. */
export type StringProblem = "nul" | "lone_surrogate";

export interface StringViolation {
  /** Where, in proto field names: `messages[2].content`, `env{}` (map keys are not echoed), `env{}.value`. */
  path: string;
  problem: StringProblem;
}

/**
 * U+0000 is refused because PostgreSQL text cannot hold it (the insert fails
 * and the caller got a 500); a lone surrogate because it has no UTF-8 form
 * (proto3 JSON decodes `"\ud800"` into one, and it would be stored as U+FFFD,
 * silently changed). Binary messages with invalid UTF-8 never get this far:
 * protobuf-es rejects them while decoding proto3 strings.
 */
export function stringProblem(s: string): StringProblem | undefined {
  if (s.includes("\0")) return "nul";
  if (!(s as WellFormedString).isWellFormed()) return "lone_surrogate";
  return undefined;
}

// Node 20 has String.prototype.isWellFormed (ES2024); the project's lib is older.
type WellFormedString = string & { isWellFormed(): boolean };

/**
 * The first string in a message (any depth: nested and repeated messages,
 * map keys and values, oneof members, well-known types) that holds U+0000 or
 * a lone surrogate. Walked with an explicit stack, so a deeply nested
 * `google.protobuf.Value` cannot exhaust the call stack.
 */
export function findStringViolation(schema: DescMessage, message: Message): StringViolation | undefined {
  const stack: Array<{ r: ReflectMessage; path: string }> = [{ r: reflect(schema, message, false), path: "" }];
  while (stack.length > 0) {
    const { r, path } = stack.pop()!;
    for (const field of r.fields) {
      if (!r.isSet(field)) continue;
      const at = path ? `${path}.${field.name}` : field.name;
      switch (field.fieldKind) {
        case "scalar": {
          if (field.scalar !== ScalarType.STRING) break;
          const problem = stringProblem(r.get(field) as string);
          if (problem) return { path: at, problem };
          break;
        }
        case "message":
          stack.push({ r: r.get(field) as ReflectMessage, path: at });
          break;
        case "list": {
          if (field.listKind === "enum" || (field.listKind === "scalar" && field.scalar !== ScalarType.STRING)) break;
          let i = 0;
          for (const item of r.get(field) as Iterable<unknown>) {
            if (field.listKind === "message") stack.push({ r: item as ReflectMessage, path: `${at}[${i}]` });
            else {
              const problem = stringProblem(item as string);
              if (problem) return { path: `${at}[${i}]`, problem };
            }
            i++;
          }
          break;
        }
        case "map": {
          const stringKeys = field.mapKey === ScalarType.STRING;
          for (const [key, value] of r.get(field) as Iterable<[unknown, unknown]>) {
            if (stringKeys) {
              const problem = stringProblem(key as string);
              if (problem) return { path: `${at}{}`, problem };
            }
            if (field.mapKind === "message") stack.push({ r: value as ReflectMessage, path: `${at}{}` });
            else if (field.mapKind === "scalar" && field.scalar === ScalarType.STRING) {
              const problem = stringProblem(value as string);
              if (problem) return { path: `${at}{}.value`, problem };
            }
          }
          break;
        }
        default:
          break;
      }
    }
  }
  return undefined;
}
