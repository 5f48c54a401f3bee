// `platform images ...`: the local driver's sandbox images (issue 22), kept by
// compute. The CLI asks compute's internal port (mutual TLS) with the
// launcher's operator certificate, which compute lets import, build, list and
// remove images (and still not exec in a sandbox). A file to import is read by
// compute itself, on its host: this CLI and compute share the machine.
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { join, resolve } from "node:path";
import { serviceTlsFiles } from "@platform/pki/files";
import type { Context, Flags } from "./commands.ts";
import { CliError, dataDir, knownEndpoints, UsageError } from "./endpoints.ts";
import type { CommandSpec } from "./spec.ts";

type Image = { name: string; digest: string; sizeBytes: string; createdAt: string; source: string };
type Handler = (ctx: Context, args: string[], flags: Flags) => Promise<unknown>;

const nameOption = { type: "string", value: "name:tag", help: "the image's name and tag", required: true } as const;

export const IMAGE_COMMANDS: CommandSpec[] = [
  {
    path: ["images", "import"],
    summary: "store an OCI image layout, a docker save archive or a root filesystem tarball as a sandbox image",
    args: "<file or directory>",
    min: 1,
    max: 1,
    options: { name: nameOption },
  },
  {
    path: ["images", "build"],
    summary: "build a Debian-based sandbox image from Debian packages (mmdebstrap; minutes)",
    options: {
      name: nameOption,
      packages: { type: "string", value: "a,b", help: "Debian packages to install, e.g. python3,nodejs,git" },
      suite: { type: "string", value: "suite", help: "Debian suite (default bookworm)" },
    },
  },
  { path: ["images", "list"], summary: "the stored sandbox images and the default", isDefault: true, options: {} },
  {
    path: ["images", "rm"],
    summary: "remove a sandbox image (refused while a sandbox runs on it)",
    args: "<name:tag>",
    min: 1,
    max: 1,
    options: {},
  },
];

export const imageHandlers: Record<string, Handler> = {
  "images import": (ctx, args, flags) => importImage(ctx, args[0]!, flags),
  "images build": (ctx, _args, flags) => buildImage(ctx, flags),
  "images list": (ctx) => listImages(ctx),
  "images rm": (ctx, args) => removeImage(ctx, args[0]!),
};

const str = (flags: Flags, name: string): string | undefined =>
  typeof flags[name] === "string" ? (flags[name] as string) : undefined;

async function importImage(ctx: Context, file: string, flags: Flags): Promise<void> {
  const name = str(flags, "name");
  if (!name) throw new UsageError("--name is required");
  if (!ctx.io.json) ctx.io.err(`importing ${file} as ${name} ...`);
  const r = await computeCall<{ image: Image }>("ImportImage", { name, path: resolve(file) }, 30 * 60_000);
  show(ctx, r.image, "imported");
}

async function buildImage(ctx: Context, flags: Flags): Promise<void> {
  const name = str(flags, "name");
  if (!name) throw new UsageError("--name is required");
  const packages = (str(flags, "packages") ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  if (!ctx.io.json)
    ctx.io.err(`building ${name} from Debian packages (${packages.join(", ") || "the base system"}): minutes ...`);
  const r = await computeCall<{ image: Image }>(
    "BuildImage",
    { name, packages, suite: str(flags, "suite") ?? "" },
    90 * 60_000,
  );
  show(ctx, r.image, "built");
}

async function listImages(ctx: Context): Promise<void> {
  const r = await computeCall<{ images?: Image[]; defaultImage?: string; defaultIsHost?: boolean; anyImage?: boolean }>(
    "ListImages",
    {},
    30_000,
  );
  const images = r.images ?? [];
  if (ctx.io.json)
    return ctx.io.value({ images, defaultImage: r.defaultImage ?? "", defaultIsHost: !!r.defaultIsHost });
  if (r.anyImage) ctx.io.err("this compute's driver pulls images from a registry: any name is taken");
  for (const i of images)
    ctx.io.line(`${i.name}  ${i.digest.slice(0, 19)}  ${mib(i.sizeBytes)}  ${i.createdAt}  ${i.source}`);
  if (images.length === 0) ctx.io.err("no images stored");
  ctx.io.err(
    `default: ${r.defaultImage || "host"}${r.defaultIsHost ? " (not stored: sandboxes without an image see the host's /usr)" : ""}`,
  );
}

async function removeImage(ctx: Context, name: string): Promise<void> {
  const r = await computeCall<{ image: Image }>("DeleteImage", { name }, 60_000);
  if (ctx.io.json) return ctx.io.value(r.image);
  ctx.io.line(`removed ${r.image.name} (${r.image.digest.slice(0, 19)})`);
}

function show(ctx: Context, image: Image, verb: string): void {
  if (ctx.io.json) {
    ctx.io.value(image);
    return;
  }
  ctx.io.line(`${verb} ${image.name}  ${image.digest}  ${mib(image.sizeBytes)}`);
}

const mib = (bytes: string) => `${(Number(bytes) / 2 ** 20).toFixed(1)} MiB`;

/** One Connect unary call (JSON) to ComputeService on compute's internal port, as the operator. */
async function computeCall<T>(method: string, body: unknown, timeoutMs: number): Promise<T> {
  const { endpoints, path } = knownEndpoints();
  const base = endpoints.computeGrpc;
  if (!base) throw new CliError(`compute's address is not known: start the platform (looked in ${path})`);
  const url = new URL(`/compute.v1.ComputeService/${method}`, base);
  const payload = JSON.stringify(body);
  const headers = { "content-type": "application/json", "connect-protocol-version": "1" };
  let status: number;
  let text: string;
  if (url.protocol === "http:") {
    const res = await fetch(url, { method: "POST", headers, body: payload, signal: AbortSignal.timeout(timeoutMs) });
    status = res.status;
    text = await res.text();
  } else {
    const files = serviceTlsFiles(join(dataDir(), "tls"), "operator");
    let tls: { ca: Buffer; cert: Buffer; key: Buffer };
    try {
      tls = { ca: readFileSync(files.caFile), cert: readFileSync(files.certFile), key: readFileSync(files.keyFile) };
    } catch {
      throw new CliError(
        `the operator certificate (${files.certFile}) is not readable by this user: run as the launcher's user`,
      );
    }
    ({ status, text } = await new Promise<{ status: number; text: string }>((ok, fail) => {
      const req = request(url, { method: "POST", headers, ...tls, timeout: timeoutMs }, (res) => {
        let t = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          t += c;
        });
        res.on("end", () => ok({ status: res.statusCode ?? 0, text: t }));
        res.on("error", fail);
      });
      req.on("timeout", () => req.destroy(new Error("timed out")));
      req.on("error", fail);
      req.end(payload);
    }));
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new CliError(`compute answered ${status} without JSON`);
  }
  if (status !== 200) {
    const e = json as { code?: string; message?: string };
    throw new CliError(`${e.code ?? `HTTP ${status}`}: ${e.message ?? text.slice(0, 200)}`);
  }
  return json as T;
}
