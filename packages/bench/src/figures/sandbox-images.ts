import * as fs from "node:fs";
import { randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stageRootfs, tarLayer } from "@platform/compute/testing";
import { computeClient, timedExec } from "../compute-client.ts";
import type { Figure } from "../figure.ts";
import { repeat, ratio } from "../loop.ts";
import { lat, now, summarize } from "../stats.ts";

/**
 * Issue 22: CreateSandbox then `echo hi` to the first stdout byte on a stored
 * image (a small tree imported here from the host's own programs), against
 * the same on the default (the host's /usr: no default image is stored in the
 * bench), interleaved. Both adopt warm sandboxes: the default's pool, and the
 * one kept for an image once used.
 */
export const sandboxImages: Figure = {
  id: "sandbox-images",
  title: "sandbox create → first byte on a stored image vs the default (local driver)",
  goal: "image p50 within 1.5× the default's",
  async run(stack, size) {
    const compute = await stack.compute();
    const client = computeClient(compute.urls.grpc!, await stack.tls("agents"));
    const operator = computeClient(compute.urls.grpc!, await stack.tls("operator"));
    const work = fs.mkdtempSync(join(tmpdir(), "bench-images-"));
    try {
      const stage = join(work, "rootfs");
      stageRootfs(stage, { "etc/os-release": "ID=bench\n" });
      await tarLayer(stage, join(work, "rootfs.tar"));
      // compute reads the file as root; the bench may run as another user with a private tmp, so 0755/0644.
      fs.chmodSync(work, 0o755);
      const t0 = performance.now();
      await operator.importImage({ name: "bench-image:1", path: join(work, "rootfs.tar") });
      const importMs = performance.now() - t0;
      const once = async (image: string) => {
        const start = now();
        const res = await client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID(), image });
        const r = await timedExec(client, res.sandboxId, "/bin/echo", ["hi"], start);
        await client.destroySandbox({ sandboxId: res.sandboxId });
        return r.firstByteNs;
      };
      // Warm-up: the image's first use starts its warm pool.
      await once("");
      await once("bench-image:1");
      await new Promise((r) => setTimeout(r, 1000));
      const onDefault: number[] = [];
      const onImage: number[] = [];
      // One warm sandbox is kept per image in use: a pause lets it be made again between samples.
      const n = await repeat(
        { n: size === "quick" ? 3 : 50, budgetMs: size === "quick" ? 10_000 : 60_000, minN: 3 },
        async () => {
          onDefault.push(await once(""));
          onImage.push(await once("bench-image:1"));
          await new Promise((r) => setTimeout(r, 300));
        },
      );
      const d = summarize(onDefault);
      const i = summarize(onImage);
      return {
        baseline: `default (host /usr): ${lat(d)}`,
        measured: `image: ${lat(i)}`,
        ratio: `p50 ${ratio(i.p50, d.p50)}`,
        met: i.p50 <= 1.5 * d.p50,
        notes: `${n} pairs, each sandbox destroyed after its sample and 300 ms between pairs (the pool refills one at a time); import of the ${(fs.statSync(join(work, "rootfs.tar")).size / 2 ** 20).toFixed(1)} MiB tarball took ${importMs.toFixed(0)} ms.`,
        raw: { default: d, image: i, importMs },
      };
    } finally {
      await operator.deleteImage({ name: "bench-image:1" }).catch(() => {});
      fs.rmSync(work, { recursive: true, force: true });
    }
  },
};
