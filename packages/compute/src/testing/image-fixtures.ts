import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { dirname, join } from "node:path";
import { create } from "tar";

/** Host programs a test image carries (what the driver contract suite and the image tests run). */
export const TEST_IMAGE_PROGRAMS = [
  "sh",
  "true",
  "false",
  "cat",
  "sleep",
  "tr",
  "head",
  "rm",
  "ls",
  "mkdir",
  "env",
  "id",
  "dd",
  "stat",
  "wc",
  "touch",
  "ln",
  "chmod",
  "echo",
];

/**
 * Stages a tiny root filesystem in dir from the host's own programs: each
 * copied into bin/ with the shared libraries ldd names (at the same paths),
 * usr/bin a link to ../bin, and the given extra files. No network, no package
 * manager: what the test machine already has.
 */
export function stageRootfs(dir: string, files: Record<string, string> = {}, programs = TEST_IMAGE_PROGRAMS): void {
  fs.mkdirSync(join(dir, "bin"), { recursive: true });
  const libs = new Set<string>();
  for (const name of programs) {
    const host = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map((d) => join(d, name)).find((f) => fs.existsSync(f));
    if (!host) throw new Error(`no ${name} on this machine to put in a test image`);
    fs.copyFileSync(fs.realpathSync(host), join(dir, "bin", name));
    fs.chmodSync(join(dir, "bin", name), 0o755);
    const ldd = execFileSync("ldd", [host], { encoding: "utf8" });
    for (const m of ldd.matchAll(/(?:=>\s*)?(\/\S+)\s+\(0x/g)) libs.add(m[1] as string);
  }
  for (const lib of libs) {
    const target = join(dir, lib);
    fs.mkdirSync(dirname(target), { recursive: true });
    fs.copyFileSync(fs.realpathSync(lib), target);
  }
  fs.mkdirSync(join(dir, "usr"), { recursive: true });
  fs.symlinkSync("../bin", join(dir, "usr", "bin"));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(dirname(join(dir, name)), { recursive: true });
    fs.writeFileSync(join(dir, name), text);
  }
}

/** A layer tar of dir's contents (gzip when asked), entries named `./...` as docker's are. */
export async function tarLayer(dir: string, file: string, gzip = false): Promise<void> {
  await create({ file, cwd: dir, gzip, portable: true }, ["."]);
}

/** A `docker save` archive (old format: <n>/layer.tar and manifest.json) of the given layer tars, in order. */
export async function dockerSaveArchive(layers: string[], file: string, work: string): Promise<void> {
  const dir = join(work, `docker-save-${Date.now()}-${Math.random().toString(36).slice(2)}`);
  fs.mkdirSync(dir, { recursive: true });
  const names = layers.map((layer, i) => {
    fs.mkdirSync(join(dir, `l${i}`));
    fs.copyFileSync(layer, join(dir, `l${i}`, "layer.tar"));
    return `l${i}/layer.tar`;
  });
  fs.writeFileSync(join(dir, "config.json"), JSON.stringify({ rootfs: { type: "layers" } }));
  fs.writeFileSync(
    join(dir, "manifest.json"),
    JSON.stringify([{ Config: "config.json", RepoTags: ["t:1"], Layers: names }]),
  );
  await create({ file, cwd: dir, portable: true }, ["manifest.json", "config.json", ...names.map((n) => dirname(n))]);
}

/** An OCI image layout directory holding one image of the given layer tars (gzip ones named so). */
export function ociLayout(layers: Array<{ file: string; gzip: boolean }>, dir: string): void {
  fs.mkdirSync(join(dir, "blobs", "sha256"), { recursive: true });
  const put = (data: Buffer, mediaType: string) => {
    const hex = createHash("sha256").update(data).digest("hex");
    fs.writeFileSync(join(dir, "blobs", "sha256", hex), data);
    return { mediaType, digest: `sha256:${hex}`, size: data.length };
  };
  const config = put(
    Buffer.from(JSON.stringify({ architecture: "amd64", os: "linux" })),
    "application/vnd.oci.image.config.v1+json",
  );
  const layerDescs = layers.map((l) =>
    put(
      fs.readFileSync(l.file),
      l.gzip ? "application/vnd.oci.image.layer.v1.tar+gzip" : "application/vnd.oci.image.layer.v1.tar",
    ),
  );
  const manifest = put(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config,
        layers: layerDescs,
      }),
    ),
    "application/vnd.oci.image.manifest.v1+json",
  );
  fs.writeFileSync(join(dir, "index.json"), JSON.stringify({ schemaVersion: 2, manifests: [manifest] }));
  fs.writeFileSync(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
}

/**
 * A tar with exactly the entries given (python3's tarfile, which writes what it
 * is told: absolute names, `..`, devices, links anywhere), for refusal tests.
 */
export function rawTar(
  file: string,
  entries: Array<{
    name: string;
    type: "file" | "dir" | "symlink" | "hardlink" | "chardev" | "fifo";
    target?: string;
    data?: string;
    mode?: number;
  }>,
): void {
  const script = `
import io, json, sys, tarfile
entries = json.loads(sys.argv[2])
types = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE, "chardev": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for e in entries:
        i = tarfile.TarInfo(e["name"])
        i.type = types[e["type"]]
        i.mode = e.get("mode", 0o755 if e["type"] == "dir" else 0o644)
        data = e.get("data", "").encode()
        if e["type"] in ("symlink", "hardlink"): i.linkname = e["target"]
        if e["type"] == "chardev": i.devmajor, i.devminor = 1, 3
        i.size = len(data) if e["type"] == "file" else 0
        t.addfile(i, io.BytesIO(data) if e["type"] == "file" else None)
`;
  execFileSync("python3", ["-c", script, file, JSON.stringify(entries)]);
}
