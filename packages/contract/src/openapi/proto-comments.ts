import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromBinary } from "@bufbuild/protobuf";
import { type DescriptorProto, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";

/**
 * The comments written in proto/, by full name (`agents.v1.Agent`,
 * `agents.v1.Agent.slug`, `agents.v1.SessionService.SendMessages`): the
 * generated descriptors in gen/ carry no source info, so they come from a
 * `buf build` of proto/ with it.
 */
export type ProtoComments = ReadonlyMap<string, string>;

// FileDescriptorProto and DescriptorProto field numbers, as source paths use them.
const MESSAGE = 4;
const SERVICE = 6;
const FIELD = 2;
const NESTED = 3;
const METHOD = 2;

/** One comment as a Markdown paragraph or more: lines joined, blank lines kept. */
function clean(text: string): string {
  return text
    .split("\n")
    .map((l) => l.trim())
    .join("\n")
    .trim()
    .split(/\n{2,}/)
    .map((p) => p.replace(/\n/g, " "))
    .join("\n\n");
}

/** Runs `buf build` on proto/ (buf from node_modules) and reads its comments. */
export function loadProtoComments(root: string): ProtoComments {
  const dir = mkdtempSync(join(tmpdir(), "proto-comments-"));
  try {
    const out = join(dir, "set.binpb");
    execFileSync(join(root, "node_modules/.bin/buf"), ["build", "proto", "--as-file-descriptor-set", "-o", out], {
      cwd: root,
      stdio: ["ignore", "ignore", "inherit"],
    });
    return commentsOf(readFileSync(out));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The leading comments of every message, field and method of a descriptor set, by full name (for OpenAPI descriptions). */
export function commentsOf(bytes: Uint8Array): ProtoComments {
  const set = fromBinary(FileDescriptorSetSchema, bytes);
  const out = new Map<string, string>();
  for (const file of set.file) {
    const names = new Map<string, string>();
    const prefix = file.package ? `${file.package}.` : "";
    const walk = (msgs: DescriptorProto[], path: number[], scope: string) => {
      msgs.forEach((m, i) => {
        const name = `${scope}${m.name}`;
        const p = [...path, i];
        names.set(p.join("."), name);
        m.field.forEach((f, j) => {
          names.set([...p, FIELD, j].join("."), `${name}.${f.name}`);
        });
        walk(m.nestedType, [...p, NESTED], `${name}.`);
      });
    };
    walk(file.messageType, [MESSAGE], prefix);
    file.service.forEach((s, i) => {
      names.set([SERVICE, i].join("."), `${prefix}${s.name}`);
      s.method.forEach((m, j) => {
        names.set([SERVICE, i, METHOD, j].join("."), `${prefix}${s.name}.${m.name}`);
      });
    });
    for (const loc of file.sourceCodeInfo?.location ?? []) {
      const name = names.get(loc.path.join("."));
      const text = clean(loc.leadingComments || loc.trailingComments || "");
      if (name && text) out.set(name, text);
    }
  }
  return out;
}
