// Exec round trip of the local driver: a long-lived sandbox entered with
// nsenter per exec (what the driver does) against a fresh bwrap per command
// (the alternative), measured in the same run. Not part of the tests.
//   node --import tsx packages/compute/bench/exec-latency.ts [iterations]
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalDriver } from "../src/drivers/local/local-driver.ts";
import { collectExec, contractSpec } from "../src/testing/driver-contract.ts";

const n = Number(process.argv[2] ?? 200);
const dataDir = fs.mkdtempSync(join(tmpdir(), "compute-bench-"));
fs.chmodSync(dataDir, 0o711);
const driver = new LocalDriver({ dataDir, cgroupPrefix: `platform-compute-bench-${process.pid}` });
const spec = contractSpec("bench");
await driver.create(spec);
await driver.waitSettled(spec.sandboxId);

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
}

async function time(fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < 10; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await fn();
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return out;
}

const ws = join(dataDir, "bare-ws");
fs.mkdirSync(ws);
const bare = await time(
  () =>
    new Promise((resolve) => {
      const c = spawn(
        "bwrap",
        [
          "--unshare-all",
          "--ro-bind",
          "/usr",
          "/usr",
          "--symlink",
          "usr/bin",
          "/bin",
          "--symlink",
          "usr/lib",
          "/lib",
          "--symlink",
          "usr/lib64",
          "/lib64",
          "--proc",
          "/proc",
          "--dev",
          "/dev",
          "--bind",
          ws,
          "/workspace",
          "--",
          "/bin/true",
        ],
        { stdio: "ignore" },
      );
      c.on("close", resolve);
    }),
);
const entered = await time(() => collectExec(driver, spec.sandboxId, { command: "/bin/true" }));
const plain = await time(
  () =>
    new Promise((resolve) => {
      spawn("/bin/true", { stdio: "ignore" }).on("close", resolve);
    }),
);
const row = (name: string, xs: number[]) =>
  console.log(
    `${name.padEnd(34)} p50 ${pct(xs, 50).toFixed(2)} ms  p90 ${pct(xs, 90).toFixed(2)} ms  p99 ${pct(xs, 99).toFixed(2)} ms`,
  );
row("spawn /bin/true (baseline)", plain);
row("fresh bwrap per exec", bare);
row("driver exec (nsenter into init)", entered);
console.log(`ratio driver/fresh-bwrap p50: ${(pct(entered, 50) / pct(bare, 50)).toFixed(2)}`);
await driver.destroy(spec.sandboxId);
await driver.close();
fs.rmSync(dataDir, { recursive: true, force: true });
