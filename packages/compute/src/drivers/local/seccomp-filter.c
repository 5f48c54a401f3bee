/*
 * The seccomp filter of every process in a local sandbox: the bwrap init gets
 * it through `bwrap --seccomp FD` (the helper prints it with --seccomp-bpf),
 * each exec child installs it just before execve (exec-helper.c), since a
 * process that enters the sandbox with setns does not inherit the init's.
 *
 * Allow by default, refuse with EPERM the system calls a sandboxed command
 * never needs and that are the usual doors out of a container or into the
 * kernel's less-trodden code (roughly the families Docker's default profile
 * refuses). Built with libseccomp rather than by hand, so the architecture
 * check (x86_64 only: the i386 ABI and x32 system calls kill the process) and
 * the jump offsets are generated, not written.
 */
#define _GNU_SOURCE
#include "seccomp-filter.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Refused outright, with EPERM. Grouped by why. */
static const char *const REFUSED[] = {
    /* kernel keyrings: shared kernel state, a long CVE history */
    "keyctl", "add_key", "request_key",
    /* eBPF and perf: kernel attack surface, information leaks */
    "bpf", "perf_event_open",
    /* mounts, old and new API: rearranging the filesystem view */
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr",
    /* loading another kernel or kernel modules */
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    /* reading or steering other processes (and their descriptors) */
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    /* new namespaces or entering others (clone's flags: below) */
    "unshare", "setns",
    /* host administration: swap, reboot, kernel log, accounting, clocks, I/O ports, quotas */
    "swapon", "swapoff", "reboot", "syslog", "acct", "settimeofday", "clock_settime", "adjtimex", "clock_adjtime",
    "iopl", "ioperm", "quotactl", "quotactl_fd",
    /* userfaultfd stalls the kernel at will inside copy_from_user: a race exploitation tool */
    "userfaultfd",
    /* file handles bypass path-based confinement (the "shocker" escape) */
    "open_by_handle_at", "name_to_handle_at",
    /* io_uring: a second system call interface, much of the recent kernel CVE count */
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    /* obsolete or removed interfaces nothing current uses */
    "lookup_dcookie", "uselib", "ustat", "sysfs", "_sysctl", "vhangup", "nfsservctl", "create_module",
    "get_kernel_syms", "query_module",
};

/* clone() with any of these makes a namespace; without them it is fork or a thread. */
static const unsigned long CLONE_NAMESPACE_FLAGS[] = {
    CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
};

int sandbox_seccomp_export(int fd) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return -ENOMEM;
  int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  for (size_t i = 0; rc == 0 && i < sizeof REFUSED / sizeof *REFUSED; i++) {
    int nr = seccomp_syscall_resolve_name(REFUSED[i]);
    /* A name this libseccomp does not know would silently leave a hole: fail instead. */
    rc = nr == __NR_SCMP_ERROR ? -EINVAL : seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
  }
  for (size_t i = 0; rc == 0 && i < sizeof CLONE_NAMESPACE_FLAGS / sizeof *CLONE_NAMESPACE_FLAGS; i++) {
    unsigned long flag = CLONE_NAMESPACE_FLAGS[i];
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
  }
  /* clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back to clone. */
  if (rc == 0) rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc == 0) rc = seccomp_export_bpf(ctx, fd);
  seccomp_release(ctx);
  return rc;
}

int sandbox_seccomp_program(struct sock_fprog *prog) {
  int fd = memfd_create("sandbox-seccomp", MFD_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = sandbox_seccomp_export(fd);
  off_t size = rc == 0 ? lseek(fd, 0, SEEK_END) : -1;
  if (rc == 0 && (size <= 0 || size % sizeof(struct sock_filter) != 0)) rc = -EINVAL;
  struct sock_filter *insns = rc == 0 ? malloc((size_t)size) : NULL;
  if (rc == 0 && (!insns || pread(fd, insns, (size_t)size, 0) != size)) rc = -EIO;
  close(fd);
  if (rc != 0) {
    free(insns);
    return rc;
  }
  prog->len = (unsigned short)(size / sizeof(struct sock_filter));
  prog->filter = insns;
  return 0;
}
