import { testServer } from "./testing/fixture.ts";
const { server } = testServer();
const { port } = await server.listen();
console.log("PORT", port);
process.on("SIGTERM", async () => { await server.close(); process.exit(0); });
