import * as fs from "node:fs";
import { join } from "node:path";

/** Top-level names of an image the sandbox never gets from it: bwrap makes its own (or, for etc, binds it below). */
const OWN = new Set(["proc", "dev", "tmp", "sys", "run", "etc"]);

/**
 * bwrap arguments that make an image's tree the sandbox's root: each
 * top-level directory (and file) bound read-only from `staged` (where the launcher
 * bound the tree), each top-level link made again as a link (never bound:
 * binding follows it on the host), the image's /etc read-only with the
 * driver's own passwd, group, hosts and hostname bound over it by the caller.
 * The top-level directory holding the mount path is left out when the image
 * has no such path (it could not be made in a read-only tree), and /var/tmp
 * is a tmpfs where the image has one. `tree` is the tree on the host, read
 * here only to list it.
 */
export function imageRootArgs(tree: string, staged: string, mountPath: string): string[] {
  const args: string[] = [];
  const mountTop = mountPath.split("/")[1] ?? "";
  const mountInImage = fs.lstatSync(join(tree, mountPath), { throwIfNoEntry: false })?.isDirectory() ?? false;
  for (const name of fs.readdirSync(tree).sort()) {
    if (OWN.has(name) || (name === mountTop && !mountInImage)) continue;
    const st = fs.lstatSync(join(tree, name));
    if (st.isSymbolicLink()) args.push("--symlink", fs.readlinkSync(join(tree, name)), `/${name}`);
    else if (st.isDirectory() || st.isFile()) args.push("--ro-bind", join(staged, name), `/${name}`);
  }
  args.push("--ro-bind", join(staged, "etc"), "/etc");
  if (fs.lstatSync(join(tree, "var/tmp"), { throwIfNoEntry: false })?.isDirectory()) args.push("--tmpfs", "/var/tmp");
  return args;
}
