import { create, type DescField, type DescMessage, type Message, ScalarType } from "@bufbuild/protobuf";

/** One place in a request message where a string can go. */
export interface StringSlot {
  /** Proto field path, e.g. `messages[0].content`, `env{key}`. */
  path: string;
  /** Puts `value` there (creating parents), on a message made from the baseline. */
  put(message: Message, value: string): void;
}

type Any = Record<string, unknown>;

function getField(m: Any, f: DescField): unknown {
  if (!f.oneof) return m[f.localName];
  const o = m[f.oneof.localName] as { case?: string; value?: unknown } | undefined;
  return o?.case === f.localName ? o.value : undefined;
}

function setField(m: Any, f: DescField, value: unknown): void {
  if (f.oneof) m[f.oneof.localName] = { case: f.localName, value };
  else m[f.localName] = value;
}

/**
 * Every string a request of this type can carry, read from its descriptor:
 * singular, repeated (one element), map keys and values, fields of nested,
 * repeated and map-valued messages, oneof members. Recursive types stop at
 * `maxDepth` levels of nesting.
 */
export function stringSlots(schema: DescMessage, maxDepth = 3): StringSlot[] {
  const out: StringSlot[] = [];
  const walk = (desc: DescMessage, prefix: string, depth: number, reach: (root: Message) => Any) => {
    for (const f of desc.fields) {
      const at = `${prefix}${f.name}`;
      const nested = (child: DescMessage, path: string, open: (parent: Any) => Any) => {
        if (depth < maxDepth) walk(child, `${path}.`, depth + 1, (root) => open(reach(root)));
      };
      switch (f.fieldKind) {
        case "scalar":
          if (f.scalar === ScalarType.STRING) out.push({ path: at, put: (root, v) => setField(reach(root), f, v) });
          break;
        case "list":
          if (f.listKind === "scalar" && f.scalar === ScalarType.STRING) {
            out.push({ path: `${at}[0]`, put: (root, v) => setField(reach(root), f, [v]) });
          } else if (f.listKind === "message") {
            const child = f.message;
            nested(child, `${at}[0]`, (parent) => {
              let list = getField(parent, f) as Any[] | undefined;
              if (!list || list.length === 0) {
                list = [create(child) as unknown as Any];
                setField(parent, f, list);
              }
              return list[0]!;
            });
          }
          break;
        case "map": {
          const zeroValue = (): unknown => {
            // A google.protobuf.Value without a kind cannot be written as JSON (the
            // client itself refuses it): a Struct's entry gets a string.
            if (f.mapKind === "message" && f.message.typeName === "google.protobuf.Value")
              return create(f.message, { kind: { case: "stringValue", value: "v" } } as never);
            if (f.mapKind === "message") return create(f.message);
            if (f.mapKind === "enum") return 0;
            return f.scalar === ScalarType.STRING ? "v" : f.scalar === ScalarType.BOOL ? false : 0;
          };
          if (f.mapKey === ScalarType.STRING)
            out.push({ path: `${at}{key}`, put: (root, v) => setField(reach(root), f, { [v]: zeroValue() }) });
          if (f.mapKind === "scalar" && f.scalar === ScalarType.STRING) {
            out.push({ path: `${at}{value}`, put: (root, v) => setField(reach(root), f, { k: v }) });
          } else if (f.mapKind === "message") {
            const child = f.message;
            nested(child, `${at}{k}`, (parent) => {
              const map = { k: create(child) as unknown as Any };
              setField(parent, f, map);
              return map.k;
            });
          }
          break;
        }
        case "message": {
          const child = f.message;
          nested(child, at, (parent) => {
            let m = getField(parent, f) as Any | undefined;
            if (!m) {
              m = create(child) as unknown as Any;
              setField(parent, f, m);
            }
            return m;
          });
          break;
        }
        default:
          break;
      }
    }
  };
  walk(schema, "", 0, (root) => root as unknown as Any);
  return out;
}
