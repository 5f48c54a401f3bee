import * as fs from "node:fs";
import { join } from "node:path";

/** Host /etc entries a dynamically linked toolchain needs; nothing with secrets. */
const ETC_ALLOWLIST = [
  "ld.so.cache",
  "ld.so.conf",
  "ld.so.conf.d",
  "alternatives",
  "localtime",
  "nsswitch.conf",
  "mime.types",
  "os-release",
  "debian_version",
  "profile",
  "bash.bashrc",
  "inputrc",
  "terminfo",
];

const SYSTEM_DIRS = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/**
 * bwrap arguments for a sandbox's long-lived init: every namespace new
 * (user, mount, pid, ipc, uts, net, cgroup; the network one made by the
 * launch helper before bwrap runs where `networkMade`), no further user namespaces
 * (`--disable-userns`: nested ones are where most container escapes start),
 * the seccomp filter read from seccompFd, a read-only system root made of
 * the host's /usr (and the merged-/usr symlinks) or an image's tree (imageRoot),
 * a minimal generated /etc (for the host's root with the host's allow-listed
 * files the launcher bound into etcDir: hostEtcBinds),
 * its own /proc, /dev and /tmp, and the workspace bound read-write at
 * mount_path. Nothing else of the host is visible: not /root, /home, /work,
 * /var, /run or the host's /proc.
 */
export function bwrapArgs(options: {
  workspace: string;
  etcDir: string;
  mountPath: string;
  seccompFd: number;
  /** An image's root instead of the host's /usr (images/image-root.ts); its /etc gets the generated files bound over. */
  imageRoot?: string[];
  /** bwrap runs in a new network namespace (with its loopback up) the launch helper made: it makes no other. */
  networkMade?: boolean;
}): string[] {
  const args = [
    ...(options.networkMade
      ? ["--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
      : ["--unshare-all", "--unshare-user"]),
    "--disable-userns",
    "--seccomp",
    String(options.seccompFd),
    "--new-session",
  ];
  args.push("--hostname", "sandbox");
  if (options.imageRoot) args.push(...options.imageRoot);
  else hostRootArgs(args);
  // The host root's /etc is etcDir bound whole: its generated files, and the host's allow-listed
  // ones the launcher bound into it (hostEtcBinds) before bwrap runs, where each would cost bwrap a
  // bind and a read of the whole mount table after the launcher's move into the sandbox's cgroup.
  if (!options.imageRoot) args.push("--ro-bind", options.etcDir, "/etc");
  else
    for (const name of ["passwd", "group", "hosts", "hostname"]) {
      args.push("--ro-bind", join(options.etcDir, name), join("/etc", name));
    }
  args.push(
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    "--bind",
    options.workspace,
    options.mountPath,
    "--chdir",
    options.mountPath,
    "--remount-ro",
    "/",
  );
  return args;
}

/** The host mode's root: the host's /usr and merged-/usr links read-only, /var/tmp (its /etc: bwrapArgs). */
function hostRootArgs(args: string[]): void {
  args.push("--ro-bind", "/usr", "/usr", "--dir", "/var/tmp");
  for (const name of SYSTEM_DIRS) {
    const host = `/${name}`;
    let st: fs.Stats;
    try {
      st = fs.lstatSync(host);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) args.push("--symlink", fs.readlinkSync(host), host);
    else if (st.isDirectory()) args.push("--ro-bind", host, host);
  }
}

/**
 * The host's allow-listed /etc entries as read-only binds [source, target]
 * into etcDir (the sandbox's generated /etc), for the launcher to make
 * before bwrap runs: the launch helper's read-only binds, or the shell
 * chain's `mount --rbind -o ro,nosuid,nodev` (a missing source is skipped).
 */
export function hostEtcBinds(etcDir: string): [string, string][] {
  return ETC_ALLOWLIST.map((name) => [join("/etc", name), join(etcDir, name)]);
}

export const SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** The environment every process in a sandbox starts from; none of the service's own. */
export function baseEnv(mountPath: string): Record<string, string> {
  return {
    PATH: SANDBOX_PATH,
    HOME: mountPath,
    USER: "sandbox",
    LOGNAME: "sandbox",
    SHELL: "/bin/sh",
    LANG: "C.UTF-8",
    TMPDIR: "/tmp",
  };
}
