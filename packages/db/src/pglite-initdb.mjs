// Makes a new PGlite cluster in the directory given (argv[2]) and exits.
// openDatabase runs it as a process of its own for a data directory that has
// no cluster yet: PGlite's initdb runs a second PGlite and the initdb WASM
// module beside the one that stays, and what they leave behind (their WASM
// memories until a full GC, the allocator's high-water mark after it) would
// stay in the service's resident memory for its whole life.
import { PGlite } from "@electric-sql/pglite";

const dir = process.argv[2];
if (!dir) {
  process.stderr.write("usage: pglite-initdb.mjs <data directory>\n");
  process.exit(2);
}
const pglite = await PGlite.create(dir);
await pglite.close();
