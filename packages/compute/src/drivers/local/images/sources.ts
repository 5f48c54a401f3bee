import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { join, posix, sep } from "node:path";
import { PlatformError } from "@platform/errors";
import { applyLayer, listOrRefuse } from "./unpack.ts";

/** One layer to apply, in order: a tar file (plain or gzip) and the name an error gives it. */
export interface Layer {
  file: string;
  name: string;
}

const bad = (message: string) => PlatformError.invalidArgument(message, "image_source_invalid");

const ARCH: Record<string, string> = {
  x64: "amd64",
  arm64: "arm64",
  arm: "arm",
  ia32: "386",
  s390x: "s390x",
  ppc64: "ppc64le",
};

/**
 * What an import reads, in the order the layers apply: an OCI image layout
 * (directory, or a tar of one), a `docker save` archive (its manifest.json,
 * old or OCI-shaped), or else a plain root filesystem tarball (one layer).
 * An archive of an image is unpacked into `scratch` first, with the same
 * checks as a layer.
 */
export async function layersOf(source: string, scratch: string): Promise<Layer[]> {
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(source, { throwIfNoEntry: false });
  } catch (err) {
    throw bad(`cannot read ${source.slice(0, 200)}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
  }
  if (!st) throw bad(`no such file: ${source.slice(0, 200)}`);
  if (st.isDirectory()) return layersOfDir(source);
  if (!st.isFile()) throw bad(`not a file or directory: ${source.slice(0, 200)}`);
  if (!(await isImageArchive(source))) return [{ file: source, name: "rootfs" }];
  const outer = join(scratch, "archive");
  fs.mkdirSync(outer, { recursive: true, mode: 0o700 });
  await applyLayer(outer, source, "(archive)");
  return layersOfDir(outer);
}

/** Whether a tar holds an image (manifest.json, or index.json beside oci-layout) rather than a root filesystem. */
async function isImageArchive(file: string): Promise<boolean> {
  const top = new Set<string>();
  await listOrRefuse(file, {
    onReadEntry: (e) => {
      const name = e.path.replace(/^\.\//, "");
      if (!name.includes("/")) top.add(name);
    },
  });
  return top.has("manifest.json") || (top.has("index.json") && top.has("oci-layout"));
}

function layersOfDir(dir: string): Layer[] {
  if (fs.existsSync(join(dir, "manifest.json"))) return dockerLayers(dir);
  if (fs.existsSync(join(dir, "index.json"))) return ociLayers(dir);
  throw bad(
    "a directory to import must be an OCI image layout (index.json) or a docker save directory (manifest.json)",
  );
}

/** A file named inside the image directory: never absolute, never `..`, never resolving outside it. */
function inside(dir: string, name: string): string {
  const clean = posix.normalize(name);
  if (clean.startsWith("/") || clean === ".." || clean.startsWith("../"))
    throw bad(`the image names ${name.slice(0, 200)}, outside it`);
  const file = join(dir, clean);
  const real = fs.realpathSync(file);
  const root = fs.realpathSync(dir);
  if (real !== root && !real.startsWith(root + sep)) throw bad(`the image's ${name.slice(0, 200)} resolves outside it`);
  if (!fs.statSync(real).isFile()) throw bad(`the image's ${name.slice(0, 200)} is not a file`);
  return real;
}

function readJson(file: string, what: string): unknown {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (err) {
    throw bad(`${what} is not JSON: ${(err as Error).message.slice(0, 200)}`);
  }
}

function dockerLayers(dir: string): Layer[] {
  const manifest = readJson(inside(dir, "manifest.json"), "manifest.json") as Array<{ Layers?: unknown }>;
  const layers = Array.isArray(manifest) ? manifest[0]?.Layers : undefined;
  if (!Array.isArray(layers) || layers.some((l) => typeof l !== "string"))
    throw bad("manifest.json has no Layers list (docker save's format)");
  return (layers as string[]).map((name) => ({ file: inside(dir, name), name }));
}

interface Descriptor {
  mediaType?: string;
  digest?: string;
  platform?: { os?: string; architecture?: string };
}

function blob(dir: string, d: Descriptor): string {
  const m = /^sha256:([0-9a-f]{64})$/.exec(d.digest ?? "");
  if (!m) throw bad(`unsupported or malformed digest ${String(d.digest).slice(0, 100)}`);
  const file = inside(dir, `blobs/sha256/${m[1]}`);
  const hash = createHash("sha256");
  const fd = fs.openSync(file, "r");
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    for (let n = fs.readSync(fd, buf); n > 0; n = fs.readSync(fd, buf)) hash.update(buf.subarray(0, n));
  } finally {
    fs.closeSync(fd);
  }
  if (hash.digest("hex") !== m[1]) throw bad(`blob ${d.digest} does not match its digest`);
  return file;
}

function ociLayers(dir: string): Layer[] {
  let index = readJson(inside(dir, "index.json"), "index.json") as { manifests?: Descriptor[]; layers?: Descriptor[] };
  for (let depth = 0; depth < 4; depth++) {
    const manifests = index.manifests ?? [];
    if (manifests.length === 0) throw bad("index.json lists no manifest");
    const arch = ARCH[process.arch] ?? process.arch;
    const chosen =
      manifests.find((m) => m.platform?.os === "linux" && m.platform.architecture === arch) ??
      manifests.find((m) => !m.platform) ??
      manifests[0];
    const doc = readJson(blob(dir, chosen as Descriptor), "a manifest") as {
      manifests?: Descriptor[];
      layers?: Descriptor[];
    };
    if (!doc.manifests) {
      const layers = doc.layers ?? [];
      return layers.map((l) => {
        const type = l.mediaType ?? "";
        if (/zstd/.test(type)) throw bad(`layer ${l.digest}: zstd layers are not supported (use gzip or none)`);
        if (type && !/tar/.test(type))
          throw bad(`layer ${l.digest}: media type ${type.slice(0, 100)} is not a tar layer`);
        return { file: blob(dir, l), name: String(l.digest) };
      });
    }
    index = doc; // an image index inside: pick from it
  }
  throw bad("image indexes nested too deep");
}
