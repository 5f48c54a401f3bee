// Builds the console (Vite) into dist/: what scripts/setup.sh runs and the browser test does first.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export const CONSOLE_ROOT = fileURLToPath(new URL("..", import.meta.url));
export const CONSOLE_DIST = fileURLToPath(new URL("../dist", import.meta.url));

/** Runs `vite build` in the package; returns how long it took (ms). Throws with Vite's output on failure. */
export function buildConsole(): number {
  const started = performance.now();
  const vite = fileURLToPath(new URL("../node_modules/vite/bin/vite.js", import.meta.url));
  const r = spawnSync(process.execPath, [vite, "build"], { cwd: CONSOLE_ROOT, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`console build failed:\n${r.stdout}\n${r.stderr}`);
  return performance.now() - started;
}
