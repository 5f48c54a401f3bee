/*
 * Test probe for the sandbox seccomp filter (seccomp.test.ts): makes each
 * named system call once and prints "<name> <result>", the result being "ok"
 * or the errno's name.
 *
 *   seccomp-probe [--filter file.bpf] name...
 *
 * --filter installs a raw BPF program first (what bwrap --seccomp reads), so
 * the same calls can be made on the host by root, where the kernel would not
 * refuse them for lack of privilege: an EPERM there can only be the filter's.
 * Every call's arguments are invalid on purpose (bad pointers, flags or
 * descriptors, missing names), so even a privileged caller without the filter
 * changes nothing; the clone calls make a child that exits at once.
 * "i386" and "x32" make getpid through those ABIs (the filter kills the
 * process: the test sees SIGSYS).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BAD ((long)1) /* an address nothing is mapped at */

static long clone_with(unsigned long flags) {
  long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
  if (r == 0) _exit(0);
  if (r > 0) waitpid((pid_t)r, NULL, 0);
  return r;
}

static long i386_getpid(void) {
  long r;
  __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
  return r;
}

static long x32_getpid(void) {
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(0x40000000L | 39L) : "rcx", "r11", "memory");
  return r;
}

static long call(const char *name) {
  pid_t self = getpid();
#define IS(n) (strcmp(name, n) == 0)
  if (IS("keyctl")) return syscall(SYS_keyctl, 0 /* GET_KEYRING_ID */, -3 /* session */, 0);
  if (IS("add_key")) return syscall(SYS_add_key, BAD, BAD, BAD, 1, -2);
  if (IS("request_key")) return syscall(SYS_request_key, BAD, BAD, 0, 0);
  if (IS("bpf")) return syscall(SYS_bpf, 0, BAD, 8);
  if (IS("perf_event_open")) return syscall(SYS_perf_event_open, BAD, 0, -1, -1, ~0UL);
  if (IS("mount")) return syscall(SYS_mount, BAD, BAD, BAD, 0, 0);
  if (IS("umount2")) return syscall(SYS_umount2, "/nonexistent-probe", 0xffffffffL);
  if (IS("pivot_root")) return syscall(SYS_pivot_root, BAD, BAD);
  if (IS("open_tree")) return syscall(SYS_open_tree, -1, "", 0xffffffffL);
  if (IS("move_mount")) return syscall(SYS_move_mount, -1, "", -1, "", 0xffffffffL);
  if (IS("fsopen")) return syscall(SYS_fsopen, BAD, 0);
  if (IS("fsconfig")) return syscall(SYS_fsconfig, -1, 0xffff, 0, 0, 0);
  if (IS("fsmount")) return syscall(SYS_fsmount, -1, 0xffffffffL, 0);
  if (IS("fspick")) return syscall(SYS_fspick, -1, BAD, 0xffffffffL);
  if (IS("mount_setattr")) return syscall(SYS_mount_setattr, -1, "", 0xffffffffL, 0, 0);
  if (IS("kexec_load")) return syscall(SYS_kexec_load, 0, 0, 0, 0xffffffffL);
  if (IS("kexec_file_load")) return syscall(SYS_kexec_file_load, -1, -1, 0, 0, 0xffffffffL);
  if (IS("init_module")) return syscall(SYS_init_module, BAD, 1, "");
  if (IS("finit_module")) return syscall(SYS_finit_module, -1, "", 0);
  if (IS("delete_module")) return syscall(SYS_delete_module, "nonexistent_probe_module", 0);
  if (IS("ptrace")) return syscall(SYS_ptrace, 2 /* PTRACE_PEEKDATA */, 0x7ffffff0, 0, 0);
  if (IS("process_vm_readv")) return syscall(SYS_process_vm_readv, self, 0, 0, 0, 0, 1);
  if (IS("process_vm_writev")) return syscall(SYS_process_vm_writev, self, 0, 0, 0, 0, 1);
  if (IS("kcmp")) return syscall(SYS_kcmp, self, self, 99, 0, 0);
  if (IS("pidfd_getfd")) return syscall(SYS_pidfd_getfd, -1, 0, 0);
  if (IS("unshare")) return syscall(SYS_unshare, 0);
  if (IS("setns")) return syscall(SYS_setns, -1, 0);
  if (IS("clone_newuser")) return clone_with(CLONE_NEWUSER);
  if (IS("clone_newns")) return clone_with(CLONE_NEWNS);
  if (IS("clone_newnet")) return clone_with(CLONE_NEWNET);
  if (IS("clone_newpid")) return clone_with(CLONE_NEWPID);
  if (IS("clone_newipc")) return clone_with(CLONE_NEWIPC);
  if (IS("clone_newuts")) return clone_with(CLONE_NEWUTS);
  if (IS("clone_newcgroup")) return clone_with(CLONE_NEWCGROUP);
  if (IS("clone3")) return syscall(SYS_clone3, 0, 0);
  if (IS("swapon")) return syscall(SYS_swapon, BAD, 0xffffffffL);
  if (IS("swapoff")) return syscall(SYS_swapoff, BAD);
  if (IS("reboot")) return syscall(SYS_reboot, 0, 0, 0, 0); /* wrong magic */
  if (IS("syslog")) return syscall(SYS_syslog, 9999, 0, 0);
  if (IS("acct")) return syscall(SYS_acct, BAD);
  if (IS("settimeofday")) return syscall(SYS_settimeofday, BAD, 0);
  if (IS("clock_settime")) return syscall(SYS_clock_settime, 9999, 0);
  if (IS("adjtimex")) return syscall(SYS_adjtimex, BAD);
  if (IS("clock_adjtime")) return syscall(SYS_clock_adjtime, 9999, 0);
  if (IS("iopl")) return syscall(SYS_iopl, 4);
  if (IS("ioperm")) return syscall(SYS_ioperm, 0, 0x100000, 1);
  if (IS("quotactl")) return syscall(SYS_quotactl, (0x800001 << 8) | 99 /* QCMD(Q_SYNC, 99) */, 0, 0, 0);
  if (IS("quotactl_fd")) return syscall(SYS_quotactl_fd, -1, 0, 0, 0);
  if (IS("userfaultfd")) return syscall(SYS_userfaultfd, 0xffffffffL);
  if (IS("open_by_handle_at")) return syscall(SYS_open_by_handle_at, -1, 0, 0);
  if (IS("name_to_handle_at")) return syscall(SYS_name_to_handle_at, -1, "", 0, 0, 0xffffffffL);
  if (IS("io_uring_setup")) return syscall(SYS_io_uring_setup, 0, BAD);
  if (IS("io_uring_enter")) return syscall(SYS_io_uring_enter, -1, 0, 0, 0, 0, 0);
  if (IS("io_uring_register")) return syscall(SYS_io_uring_register, -1, 0, 0, 0);
  if (IS("lookup_dcookie")) return syscall(SYS_lookup_dcookie, 0, 0, 0);
  if (IS("uselib")) return syscall(SYS_uselib, BAD);
  if (IS("ustat")) return syscall(SYS_ustat, 0, BAD);
  if (IS("sysfs")) return syscall(SYS_sysfs, 99);
  if (IS("_sysctl")) return syscall(SYS__sysctl, BAD);
  if (IS("nfsservctl")) return syscall(SYS_nfsservctl, 0, 0, 0);
  if (IS("create_module")) return syscall(SYS_create_module, BAD, 0);
  if (IS("get_kernel_syms")) return syscall(SYS_get_kernel_syms, 0);
  if (IS("query_module")) return syscall(SYS_query_module, BAD, 0, 0, 0, 0);
  if (IS("i386")) return i386_getpid();
  if (IS("x32")) {
    long r = x32_getpid();
    /* Not through libc: a raw -errno. */
    if (r < 0) {
      errno = (int)-r;
      return -1;
    }
    return r;
  }
  fprintf(stderr, "unknown call %s\n", name);
  exit(2);
}

static void install(const char *path) {
  static struct sock_filter insns[4096];
  int fd = open(path, O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, insns, sizeof insns);
  if (n <= 0 || n % (ssize_t)sizeof *insns != 0) {
    perror(path);
    exit(2);
  }
  struct sock_fprog prog = {(unsigned short)(n / (ssize_t)sizeof *insns), insns};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
    perror("seccomp");
    exit(2);
  }
}

int main(int argc, char **argv) {
  int i = 1;
  if (argc > 2 && strcmp(argv[1], "--filter") == 0) {
    install(argv[2]);
    i = 3;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (; i < argc; i++) {
    errno = 0;
    long r = call(argv[i]);
    printf("%s %s\n", argv[i], r >= 0 ? "ok" : strerrorname_np(errno));
  }
  return 0;
}
