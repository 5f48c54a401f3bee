/*
 * launch-helper: the first process of a local sandbox's launch (launch.ts).
 *
 * It does, in one process and one execve, what the shell chain
 *   sh -c 'echo -999 > oom_score_adj; exec unshare --mount --propagation private -- sh -c "
 *     mount --bind A S && mount --bind B S/workspace [&& mount --bind C S/rootfs] &&
 *     umount -l MOUNTS_ROOT && read joined <&6 && [ joined ] && exec 6<&- &&
 *     exec setpriv [--pdeathsig keep] --reuid=U --regid=G --clear-groups
 *       --inh-caps=-all --no-new-privs -- bwrap ..."'
 * does with a fork and an execve per step (~10 ms before bwrap runs). As root:
 *
 *   1. --die-with-parent: the parent-death signal SIGKILL (setpriv --pdeathsig KILL);
 *   2. oom_score_adj -999 (a failure ignored, as the shell's echo's was);
 *   3. a new mount namespace whose mounts are all private, recursively
 *      (unshare --mount --propagation private);
 *   4. --net: a new network namespace with its loopback up (the kernel gives
 *      a loopback brought up 127.0.0.1/8 and ::1), what bwrap --unshare-net
 *      makes; bwrap then runs in it without making its own. Made here, it is
 *      made before the request comes (a spare) and while compute moves this
 *      process into the sandbox's cgroup (step 8), not after that move as
 *      bwrap would. It is owned by the initial user namespace, where no
 *      sandbox process has any capability;
 *   5. --request-fd=N (a spare started ahead): reads its fields (below) from fd N
 *      to the pipe's end, then closes it (steps 2-4 need nothing of them);
 *   6. each bind mount in order, non-recursive (mount --bind); then each
 *      read-only bind in order: where its source exists (symbolic links
 *      followed), a placeholder of its kind at the target unless one is there
 *      (a directory, or an empty file, made as root), a recursive bind, and a
 *      remount read-only, nosuid and nodev (mount --rbind -o ro,nosuid,nodev);
 *      a source that does not exist is skipped (bwrap's --ro-bind-try). These
 *      are the host files a sandbox's /etc shows: bound here, before the move
 *      into the cgroup, bwrap then binds that /etc whole (one bind and one read
 *      of the mount table, where each file was one of each after the move);
 *   7. the detach path lazily unmounted from this namespace (umount -l);
 *   8. --join-fd=N: waits for the line "joined" there (compute has moved this
 *      process into the sandbox's cgroup) and closes it; anything else (a
 *      failed move, compute gone: the pipe's end) ends it before step 9;
 *   9. drops to the sandbox user for good: no supplementary groups,
 *      setresgid(G, G, G), setresuid(U, U, U) without keepcaps (permitted,
 *      effective and ambient capabilities go with the uid), the inheritable
 *      and ambient sets cleared, no_new_privs; checked afterwards;
 *  10. --die-with-parent: the parent-death signal set again (the uid change
 *      cleared it), and it ends if the parent is already gone;
 *  11. execve of the program (bwrap) with its argv and the environment
 *      (the helper's own, or the request's).
 * Any failure before the execve ends it with status 1 and one line on stderr.
 *
 * Fields (arguments after the options, or NUL-terminated on the request fd,
 * there preceded by n-env env("K=V")...):
 *   uid gid detach-path n-binds (source target)... n-ro-binds (source target)...
 *   program argv...
 * A uid or gid of 0 is refused: nothing of a sandbox runs as root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_REQUEST (4u << 20)
#define MAX_FIELDS 65536

extern char **environ;

static void die(const char *what, int err) {
  if (err) dprintf(2, "[compute] launch: %s: %s\n", what, strerror(err));
  else dprintf(2, "[compute] launch: %s\n", what);
  _exit(1);
}

/* A decimal id in 1 .. 2^32-2 (0 is root; -1 means "unchanged" to the set*id calls). */
static uint32_t parse_id(const char *s, const char *what) {
  if (!s || *s < '1' || *s > '9') die(what, EINVAL);
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v == 0 || v >= 0xffffffffull) die(what, EINVAL);
  return (uint32_t)v;
}

static int parse_fd(const char *s, const char *what) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < 3 || v > 1024) die(what, EINVAL);
  return (int)v;
}

/* Reads fd to its end (at most MAX_REQUEST bytes) and splits it into NUL-terminated fields. */
static char **read_request(int fd, size_t *n_out) {
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  if (!buf) die("reading the request", ENOMEM);
  for (;;) {
    if (len == cap) {
      if (cap >= MAX_REQUEST) die("the request is too large", 0);
      cap *= 2;
      char *grown = realloc(buf, cap);
      if (!grown) die("reading the request", ENOMEM);
      buf = grown;
    }
    ssize_t r = read(fd, buf + len, cap - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) die("reading the request", errno);
    if (r == 0) break;
    len += (size_t)r;
  }
  close(fd);
  /* A torn request (compute gone while writing it) has no final NUL: nothing of it is used. */
  if (len == 0 || buf[len - 1] != '\0') die("the request ended early", 0);
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    if (buf[i] == '\0') n++;
  if (n > MAX_FIELDS) die("the request has too many fields", 0);
  char **fields = calloc(n + 1, sizeof *fields);
  if (!fields) die("reading the request", ENOMEM);
  size_t k = 0;
  for (size_t i = 0; i < len; k++) {
    fields[k] = buf + i;
    i += strlen(buf + i) + 1;
  }
  *n_out = n;
  return fields;
}

/* A count field: how many of what follows belong to it (bounded by what is there). */
static size_t parse_count(const char *s, size_t available, const char *what) {
  char *end;
  errno = 0;
  unsigned long v = s ? strtoul(s, &end, 10) : 0;
  if (!s || errno || end == s || *end || v > available) die(what, EINVAL);
  return (size_t)v;
}

/* Waits for exactly "joined\n" on fd, then closes it. */
static void await_joined(int fd) {
  static const char want[] = "joined\n";
  char line[sizeof want];
  size_t len = 0;
  while (len < sizeof want - 1) {
    ssize_t r = read(fd, line + len, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) die("waiting to be moved into the sandbox's cgroup", errno);
    if (r == 0) die("not moved into the sandbox's cgroup (the pipe ended)", 0);
    if (line[len] != want[len]) die("not moved into the sandbox's cgroup", 0);
    len++;
  }
  close(fd);
}

/* A new network namespace with its loopback up: the kernel configures 127.0.0.1/8 and ::1 on it then. */
static void new_network(void) {
  if (unshare(CLONE_NEWNET) < 0) die("unshare of the network namespace", errno);
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) die("a socket to bring the loopback up", errno);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strcpy(ifr.ifr_name, "lo");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) die("reading the loopback's flags", errno);
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) die("bringing the loopback up", errno);
  close(s);
}

/* A read-only bind of source at target (step 6), or nothing where source does not exist. */
static void read_only_bind(const char *source, const char *target) {
  struct stat src, tgt;
  if (stat(source, &src) < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return;
    die(source, errno);
  }
  int dir = S_ISDIR(src.st_mode);
  if (lstat(target, &tgt) < 0) {
    if (errno != ENOENT) die(target, errno);
    if (dir) {
      if (mkdir(target, 0755) < 0 && errno != EEXIST) die(target, errno);
    } else {
      int fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
      if (fd < 0 && errno != EEXIST) die(target, errno);
      if (fd >= 0) close(fd);
    }
  } else if (S_ISDIR(tgt.st_mode) != dir || S_ISLNK(tgt.st_mode)) {
    /* A placeholder of the other kind (the host's file became a directory, say): made again. */
    if ((S_ISDIR(tgt.st_mode) ? rmdir(target) : unlink(target)) < 0) die(target, errno);
    read_only_bind(source, target);
    return;
  }
  if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) < 0) die(target, errno);
  if (mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
    die(target, errno);
}

static void drop_privileges(uid_t uid, gid_t gid) {
  /* While still root: no supplementary group, then the gid, and the uid last. */
  if (setgroups(0, NULL) < 0) die("setgroups", errno);
  if (setresgid(gid, gid, gid) < 0) die("setresgid", errno);
  /* Without keepcaps (cleared here, whatever was inherited), leaving uid 0
   * for good clears the permitted, effective and ambient sets. */
  if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0) die("clearing keepcaps", errno);
  if (setresuid(uid, uid, uid) < 0) die("setresuid", errno);
  /* The inheritable set (and so nothing ambient either): all empty. */
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct none[2];
  memset(none, 0, sizeof none);
  if (syscall(SYS_capset, &hdr, none) < 0) die("capset", errno);
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) die("clearing ambient caps", errno);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("no_new_privs", errno);
  /* Checked, not assumed. */
  uid_t ru, eu, su;
  gid_t rg, eg, sg;
  if (getresuid(&ru, &eu, &su) < 0 || ru != uid || eu != uid || su != uid) die("the uid did not change", 0);
  if (getresgid(&rg, &eg, &sg) < 0 || rg != gid || eg != gid || sg != gid) die("the gid did not change", 0);
  if (getgroups(0, NULL) != 0) die("supplementary groups remain", 0);
  if (setresuid(0, 0, 0) == 0) die("root could be regained", 0);
  struct __user_cap_data_struct left[2];
  memset(left, 0, sizeof left);
  if (syscall(SYS_capget, &hdr, left) < 0) die("capget", errno);
  for (int i = 0; i < 2; i++)
    if (left[i].effective || left[i].permitted || left[i].inheritable) die("capabilities remain", 0);
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) die("no_new_privs is not set", 0);
}

int main(int argc, char **argv) {
  int die_with_parent = 0, join_fd = -1, request_fd = -1, net = 0;
  int i = 1;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
    if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    }
    if (strcmp(argv[i], "--die-with-parent") == 0) die_with_parent = 1;
    else if (strcmp(argv[i], "--net") == 0) net = 1;
    else if (strncmp(argv[i], "--join-fd=", 10) == 0) join_fd = parse_fd(argv[i] + 10, "--join-fd");
    else if (strncmp(argv[i], "--request-fd=", 13) == 0) request_fd = parse_fd(argv[i] + 13, "--request-fd");
    else die(argv[i], EINVAL);
  }
  pid_t parent = getppid();
  if (die_with_parent && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) die("parent-death signal", errno);

  /* 2. Shielded from the OOM killer as the shell chain's first process was (best effort, as its echo). */
  int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom >= 0) {
    if (write(oom, "-999\n", 5) < 0) {
      /* ignored, as before */
    }
    close(oom);
  }
  /* 3. */
  if (unshare(CLONE_NEWNS) < 0) die("unshare of the mount namespace", errno);
  if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) die("making the mounts private", errno);
  /* 4. */
  if (net) new_network();

  /* 5. */
  char **f;
  size_t n;
  char **envp = environ;
  if (request_fd >= 0) {
    if (i != argc) die("fields both in arguments and on the request fd", 0);
    char **req = read_request(request_fd, &n); /* n >= 1, req[n] == NULL */
    size_t n_env = parse_count(req[0], n - 1, "n-env");
    char **env = calloc(n_env + 1, sizeof *env);
    if (!env) die("reading the request", ENOMEM);
    memcpy(env, req + 1, n_env * sizeof *env);
    envp = env;
    f = req + 1 + n_env;
    n -= 1 + n_env;
  } else {
    f = argv + i;
    n = (size_t)(argc - i);
  }
  if (n < 5) die("too few fields", 0);
  uid_t uid = parse_id(f[0], "uid");
  gid_t gid = parse_id(f[1], "gid");
  const char *detach = f[2];
  size_t n_binds = parse_count(f[3], (n - 5) / 2, "n-binds");
  char **binds = f + 4;
  size_t n_ro = parse_count(binds[2 * n_binds], (n - 5 - 2 * n_binds) / 2, "n-ro-binds");
  char **ro_binds = binds + 2 * n_binds + 1;
  char **prog = ro_binds + 2 * n_ro;
  if ((size_t)(prog - f) >= n) die("no program", 0);
  const char *program = prog[0];
  char **prog_argv = prog + 1;
  if (!prog_argv[0]) die("no argv[0]", 0);

  /* 6. */
  for (size_t b = 0; b < n_binds; b++) {
    if (mount(binds[2 * b], binds[2 * b + 1], NULL, MS_BIND, NULL) < 0) die(binds[2 * b + 1], errno);
  }
  for (size_t b = 0; b < n_ro; b++) read_only_bind(ro_binds[2 * b], ro_binds[2 * b + 1]);
  /* 7. */
  if (detach[0] && umount2(detach, MNT_DETACH) < 0) die(detach, errno);
  /* 8. */
  if (join_fd >= 0) await_joined(join_fd);
  /* 9. */
  drop_privileges(uid, gid);
  /* 10. */
  if (die_with_parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) die("parent-death signal", errno);
    if (getppid() != parent) die("the parent is gone", 0);
  }
  /* 11. */
  execve(program, prog_argv, envp);
  die(program, errno);
  return 1;
}
