import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * "The outside world" for egress tests, all on this machine: a network
 * namespace joined to the host by a veth pair (host 198.18.N.1, world
 * 198.18.N.2: the benchmarking range, neither private nor loopback), with
 * an HTTP server on :80 and an HTTPS server on :443 (self-signed) in it,
 * serving `/` ("hello from the world") and `/bytes/<n>` (n bytes). Nothing
 * is routed beyond the pair. `close` removes all of it.
 */
export interface NetworkWorld {
  netns: string;
  hostAddress: string;
  worldAddress: string;
  /** The world's certificate (PEM), for clients that verify it. */
  caFile: string;
  close(): Promise<void>;
}

const SERVER = `
const http = require("node:http"), https = require("node:https"), fs = require("node:fs");
const handler = (req, res) => {
  let received = 0;
  req.on("data", (d) => { received += d.length; });
  req.on("end", () => {
    const m = /^\\/bytes\\/(\\d+)$/.exec(req.url);
    if (m) {
      let left = Number(m[1]);
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": left });
      const chunk = Buffer.alloc(1 << 16, 97);
      const pump = () => { while (left > 0) { const n = Math.min(left, chunk.length); left -= n; if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return res.once("drain", pump); } res.end(); };
      return pump();
    }
    const body = req.url === "/upload" ? "received " + received + "\\n" : "hello from the world\\n";
    res.writeHead(200, { "content-type": "text/plain", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
};
const dir = process.argv[2];
http.createServer(handler).listen(80, "0.0.0.0", () => {
  https.createServer({ key: fs.readFileSync(dir + "/key.pem"), cert: fs.readFileSync(dir + "/cert.pem") }, handler)
    .listen(443, "0.0.0.0", () => process.stdout.write("listening\\n"));
});
`;

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

export async function createNetworkWorld(names: string[] = ["world.test"]): Promise<NetworkWorld> {
  const tag = randomBytes(3).toString("hex");
  const netns = `egw-${tag}`;
  const hostIf = `egh${tag}`;
  const worldIf = `egx${tag}`;
  const n = 1 + ((randomBytes(1)[0] as number) % 254);
  const hostAddress = `198.18.${n}.1`;
  const worldAddress = `198.18.${n}.2`;
  const dir = fs.mkdtempSync(join(tmpdir(), "egress-world-"));
  let server: ChildProcess | undefined;
  const close = async () => {
    if (server && server.exitCode === null) {
      await new Promise<void>((r) => {
        server?.once("exit", () => r());
        server?.kill("SIGKILL");
        setTimeout(r, 2000).unref();
      });
    }
    try {
      ip("link", "del", hostIf);
    } catch {}
    try {
      ip("netns", "del", netns);
    } catch {}
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const san = names.map((name) => `DNS:${name}`).join(",");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        `/CN=${names[0]}`,
        "-addext",
        `subjectAltName=${san},IP:${worldAddress}`,
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
      ],
      { stdio: "ignore" },
    );
    ip("netns", "add", netns);
    ip("link", "add", hostIf, "type", "veth", "peer", "name", worldIf);
    ip("link", "set", worldIf, "netns", netns);
    ip("addr", "add", `${hostAddress}/30`, "dev", hostIf);
    ip("link", "set", hostIf, "up");
    ip("-n", netns, "addr", "add", `${worldAddress}/30`, "dev", worldIf);
    ip("-n", netns, "link", "set", worldIf, "up");
    ip("-n", netns, "link", "set", "lo", "up");
    fs.writeFileSync(join(dir, "server.js"), SERVER);
    server = spawn("ip", ["netns", "exec", netns, process.execPath, join(dir, "server.js"), dir], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    await new Promise<void>((resolve, reject) => {
      server?.stdout?.once("data", () => resolve());
      server?.once("exit", (code) => reject(new Error(`world server exited ${code}`)));
    });
  } catch (err) {
    await close();
    throw err;
  }
  return { netns, hostAddress, worldAddress, caFile: join(dir, "cert.pem"), close };
}

/** A namespace like a sandbox's: only loopback, nothing routed. For proxy tests without a sandbox. */
export function createIsolatedNetns(): { netns: string; path: string; close(): void } {
  const netns = `egs-${randomBytes(3).toString("hex")}`;
  ip("netns", "add", netns);
  ip("-n", netns, "link", "set", "lo", "up");
  return {
    netns,
    path: `/run/netns/${netns}`,
    close: () => {
      try {
        ip("netns", "del", netns);
      } catch {}
    },
  };
}
