// compute-images (node --import tsx packages/compute/src/images-command.ts ...; no
// shebang: tsx's import lexer misreads one here): the local driver's image store without a running compute
// (scripts/setup.sh builds the default image with it before the first start).
// With compute running, use `platform images` (compute's RPCs) instead: two
// writers of one store are not coordinated beyond refs.json's atomic rename.
//   compute-images build --name N:T [--packages a,b] [--suite S] [--data-dir DIR]
//   compute-images import FILE --name N:T [--data-dir DIR]
//   compute-images list [--data-dir DIR]
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "./config.ts";
import { buildDebianImage, validateBuild } from "./drivers/local/images/debian-build.ts";
import { ImageStore } from "./drivers/local/images/image-store.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    "data-dir": { type: "string" },
    name: { type: "string" },
    packages: { type: "string" },
    suite: { type: "string" },
  },
});
const [command, file] = positionals;
function mib(bytes: number): string {
  return (bytes / 1048576).toFixed(1);
}
async function main(): Promise<void> {
  const store = new ImageStore(values["data-dir"] ?? loadConfig().dataDir);
  try {
    if (command === "list") {
      for (const i of store.list())
        console.log(`${i.name}  ${i.digest}  ${(i.sizeBytes / 2 ** 20).toFixed(1)} MiB  ${i.source}`);
    } else if (command === "import" && file && values.name) {
      const image = await store.import(resolve(file), values.name);
      console.log(`imported ${image.name} ${image.digest}`);
    } else if (command === "build" && values.name) {
      const packages = (values.packages ?? "").split(",").filter(Boolean);
      validateBuild({ name: values.name, packages, suite: values.suite });
      console.log(`compute-images: building ${values.name} from Debian packages (${packages.join(", ")}): minutes`);
      let steps = 0;
      const image = await buildDebianImage(store, {
        name: values.name,
        packages,
        suite: values.suite,
        // One progress line per mmdebstrap step ("I: ..."), not every line apt prints.
        onProgress: (line) => {
          if (!line.startsWith("I: ")) return;
          steps += 1;
          console.log(`compute-images: step ${steps}: ${line.slice(3)}`);
        },
      });
      console.log(`built ${image.name} ${image.digest} (${mib(image.sizeBytes)} MiB)`);
    } else {
      console.error(
        "usage: compute-images build --name N:T [--packages a,b] | import FILE --name N:T | list [--data-dir DIR]",
      );
      process.exit(2);
    }
  } catch (err) {
    console.error(`compute-images: ${(err as Error).message}`);
    process.exit(1);
  }
}

void main();
