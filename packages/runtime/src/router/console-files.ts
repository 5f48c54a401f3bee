import { createReadStream, existsSync, statSync } from "node:fs";
import { extname, join, normalize, resolve, sep } from "node:path";
import type { NodeRequest, NodeResponse } from "@platform/rpc";

/**
 * The web console's Content-Security-Policy: its own scripts, styles and
 * images only, calls to its own origin only (the REST/SSE pass-through),
 * no inline script or style, no plugins, no framing, no <base>, forms post
 * nowhere else. A script injected into the page (an agent's reply is text,
 * rendered as text) could neither run nor send a token elsewhere.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "object-src 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".map": "application/json",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

const HEADERS = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
};

/**
 * GET/HEAD of the console's built files (Vite's `dist/`): a file that exists
 * under `dir`, else index.html for any other path outside /v1 (the app's own
 * routes), each with the CSP above. Hashed assets are cached for a year,
 * index.html never. Returns false when the directory has no index.html (the
 * console is not built): the router then answers its 404 as before.
 */
export function consoleFiles(dir: string) {
  const root = resolve(dir);
  return async function serve(req: NodeRequest, res: NodeResponse): Promise<boolean> {
    if (req.method !== "GET" && req.method !== "HEAD") return false;
    const path = decodeURIComponent((req.url ?? "/").split("?")[0]!);
    if (path.startsWith("/v1/") || path.includes("\0")) return false;
    const index = join(root, "index.html");
    if (!existsSync(index)) return false;
    let file = normalize(join(root, path));
    if (!file.startsWith(root + sep) || !isFile(file)) {
      // An asset that is not there is a 404; any other path is the app's.
      if (path.startsWith("/assets/") || extname(path) !== "") return false;
      file = index;
    }
    const immutable = file.startsWith(join(root, "assets") + sep);
    res.writeHead(200, {
      ...HEADERS,
      "content-type": TYPES[extname(file)] ?? "application/octet-stream",
      "content-length": statSync(file).size,
      "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
    });
    if (req.method === "HEAD") {
      res.end();
      return true;
    }
    await new Promise<void>((done) => {
      const stream = createReadStream(file);
      stream.on("error", () => {
        res.destroy();
        done();
      });
      stream.on("end", () => done());
      stream.pipe(res as NodeJS.WritableStream);
    });
    return true;
  };
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
