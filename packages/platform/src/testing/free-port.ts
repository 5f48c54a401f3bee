import { createServer } from "node:net";

// Apart from platform-stack.ts, whose imports (the services' bundler and
// settings, the PKI, the database test helpers) cost a test that only needs
// ports ~2 s of CPU to load under tsx.

/**
 * A port free on `host` now, below the kernel's ephemeral range
 * (ip_local_port_range starts at 32768): a port bound to 0 and released comes
 * from that range, where any outgoing connection of the machine (a test's
 * client of PostgreSQL, say) can take it in the seconds before the service
 * binds it; a CI run lost a platform start to EADDRINUSE so.
 */
export async function freePort(host: string): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await bindable(host, port)) return port;
  }
}

function bindable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, host, () => server.close(() => resolve(true)));
  });
}
