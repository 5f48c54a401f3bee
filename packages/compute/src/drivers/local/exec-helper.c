/*
 * exec-helper: the local driver's spawner of sandbox commands.
 *
 * One small long-lived root process per driver. Forking it costs a fraction
 * of forking the ~200 MB Node service, and each command is one fork + one
 * execve instead of sh -> nsenter -> command.
 *
 * Requests arrive on stdin, each a little-endian u32 length followed by
 * NUL-terminated fields:
 *   id, init pid, init start time (/proc/<pid>/stat field 22), uid, gid,
 *   working dir, stream socket path,
 *   n cgroup.procs files, the files, n argv, argv, n env, env ("K=V").
 * For each, the helper connects twice to the stream socket (the service
 * listens there) and writes a 5-byte tag on each (u32 id, 1 = stdout,
 * 2 = stderr); those connections become the command's fd 1 and 2, so output
 * goes straight from the command to the service with the kernel's socket
 * buffer as backpressure. The child then joins the exec's cgroups (before
 * anything of the command runs), enters the init's namespaces through a
 * pidfd (checked against the start time, so a reused pid is never entered),
 * drops to the sandbox uid with no capabilities and no_new_privs, and
 * execs the command.
 *
 * Reports, one line each on stdout:
 *   E <id> <exit code> <signal number>   the command ended
 *   F <id> <message>                     it could not be started
 * The helper exits when stdin closes (the service went away); running
 * commands are not affected.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_REQUEST (4u << 20)
#define MAX_FIELDS 65536
#define MAX_RUNNING 65536
#define STREAM_BUFFER_BYTES (1 << 20)

extern char **environ;

struct running {
  pid_t pid;
  uint32_t id;
};

static struct running running[MAX_RUNNING];
static size_t n_running;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = sizeof line - 1;
  for (char *p = line; n > 0;) {
    ssize_t w = write(1, p, (size_t)n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) exit(1); /* the service is gone */
    p += w;
    n -= (int)w;
  }
}

/* The child's last words before it could exec: on its stderr stream. */
static void die(const char *what, int err, int code) {
  dprintf(2, "[compute] %s: %s\n", what, strerror(err));
  _exit(code);
}

static int pidfd_open_checked(pid_t pid, const char *start_time) {
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) return -1;
  /* The pidfd pins the pid: if the start time matches now, it is the init. */
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int sf = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = sf < 0 ? -1 : read(sf, buf, sizeof buf - 1);
  if (sf >= 0) close(sf);
  if (n <= 0) {
    close(fd);
    errno = ESRCH;
    return -1;
  }
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  /* Fields after the command: state is field 3, start time field 22. */
  for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
  if (!p || strncmp(p + 1, start_time, strlen(start_time)) != 0 || (p[1 + strlen(start_time)] != ' ')) {
    close(fd);
    errno = ESRCH;
    return -1;
  }
  return fd;
}

static int connect_stream(const char *path, uint32_t id, uint8_t kind) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  /* Room for a fast writer to run ahead while the service is busy (fixed, per stream). */
  int sndbuf = STREAM_BUFFER_BYTES;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
  unsigned char tag[5] = {id & 0xff, (id >> 8) & 0xff, (id >> 16) & 0xff, (id >> 24) & 0xff, kind};
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || write(fd, tag, sizeof tag) != sizeof tag) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

static void write_file(const char *path, const char *value) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, value, strlen(value)) < 0) die(path, errno, 126);
  close(fd);
}

/* In the forked child, already in the sandbox's pid namespace. Never returns. */
static void start_command(int pidfd, int out, int err, uid_t uid, gid_t gid, const char *cwd, char **cgroups, size_t n_cgroups,
                          char **argv, char **envp) {
  if (dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
  /* Counted and killable as this exec before anything of the command runs. */
  for (size_t i = 0; i < n_cgroups; i++) write_file(cgroups[i], "0");
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  signal(SIGPIPE, SIG_DFL);
  setsid();
  /* While still the host's root: no supplementary groups survive into the sandbox. */
  if (setgroups(0, NULL) < 0) die("setgroups", errno, 126);
  if (setns(pidfd, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP) < 0) {
    die("entering the sandbox", errno, 126);
  }
  if (setgid(gid) < 0 || setuid(uid) < 0) die("dropping to the sandbox user", errno, 126);
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct none[2];
  memset(none, 0, sizeof none);
  if (syscall(SYS_capset, &hdr, none) < 0) die("dropping capabilities", errno, 126);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("no_new_privs", errno, 126);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, 0) < 0) die("/dev/null", errno, 126);
  syscall(SYS_close_range, 3, ~0u, 0);
  if (chdir(cwd) < 0) {
    dprintf(2, "[compute] cannot change directory to %s: %s\n", cwd, strerror(errno));
    _exit(1);
  }
  environ = envp;
  execvp(argv[0], argv);
  int e = errno;
  dprintf(2, "[compute] failed to execute %s: %s\n", argv[0], strerror(e));
  _exit(e == ENOENT ? 127 : 126);
}

static void handle(char *req, size_t len) {
  static char *fields[MAX_FIELDS];
  size_t n = 0;
  if (len == 0 || req[len - 1] != 0) {
    report("F 0 malformed request\n");
    return;
  }
  for (char *p = req; p < req + len && n < MAX_FIELDS;) {
    fields[n++] = p;
    p += strlen(p) + 1;
  }
  if (n < 10) {
    report("F 0 malformed request\n");
    return;
  }
  uint32_t id = (uint32_t)strtoul(fields[0], NULL, 10);
  pid_t init = (pid_t)strtol(fields[1], NULL, 10);
  const char *start_time = fields[2];
  uid_t uid = (uid_t)strtoul(fields[3], NULL, 10);
  gid_t gid = (gid_t)strtoul(fields[4], NULL, 10);
  const char *cwd = fields[5], *sock = fields[6];
  size_t i = 7;
  size_t n_cg = strtoul(fields[i++], NULL, 10);
  char **cgroups = &fields[i];
  i += n_cg;
  size_t n_argv = i < n ? strtoul(fields[i++], NULL, 10) : 0;
  char **argv = &fields[i];
  i += n_argv;
  size_t n_env = i < n ? strtoul(fields[i++], NULL, 10) : 0;
  char **envp = &fields[i];
  if (n_argv == 0 || i + n_env > n || n_running == MAX_RUNNING) {
    report("F %u malformed request\n", id);
    return;
  }
  /* argv and envp end at the next field; NULL-terminate copies of the pointer lists. */
  char **args = calloc(n_argv + 1, sizeof *args), **env = calloc(n_env + 1, sizeof *env);
  if (!args || !env) {
    report("F %u out of memory\n", id);
    free(args);
    free(env);
    return;
  }
  memcpy(args, argv, n_argv * sizeof *args);
  memcpy(env, envp, n_env * sizeof *env);

  int out = -1, err = -1;
  int pidfd = pidfd_open_checked(init, start_time);
  if (pidfd < 0) {
    report("F %u the sandbox init is gone: %s\n", id, strerror(errno));
    goto done;
  }
  out = connect_stream(sock, id, 1);
  err = out < 0 ? -1 : connect_stream(sock, id, 2);
  if (err < 0) {
    report("F %u stream socket: %s\n", id, strerror(errno));
    goto done;
  }
  /* Children forked from here on are born in the sandbox's pid namespace. */
  if (setns(pidfd, CLONE_NEWPID) < 0) {
    report("F %u entering the pid namespace: %s\n", id, strerror(errno));
    goto done;
  }
  pid_t pid = fork();
  if (pid == 0) start_command(pidfd, out, err, uid, gid, cwd, cgroups, n_cg, args, env);
  if (pid < 0) {
    report("F %u fork: %s\n", id, strerror(errno));
    goto done;
  }
  running[n_running++] = (struct running){pid, id};
done:
  if (out >= 0) close(out);
  if (err >= 0) close(err);
  if (pidfd >= 0) close(pidfd);
  free(args);
  free(env);
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (size_t i = 0; i < n_running; i++) {
      if (running[i].pid != pid) continue;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      report("E %u %d %d\n", running[i].id, code, sig);
      running[i] = running[--n_running];
      break;
    }
  }
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) return 1;
  fcntl(0, F_SETFD, FD_CLOEXEC);
  fcntl(1, F_SETFD, FD_CLOEXEC);
  /* Host root's own pid namespace, to come back to after each fork. */
  int own_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);

  size_t cap = 1 << 16, used = 0;
  char *buf = malloc(cap);
  if (!buf) return 1;
  for (;;) {
    struct pollfd fds[2] = {{.fd = 0, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (fds[1].revents) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si) {
      }
      reap();
    }
    if (!fds[0].revents) continue;
    if (cap - used < 4096) {
      if (cap >= MAX_REQUEST * 2) return 1;
      cap *= 2;
      char *bigger = realloc(buf, cap);
      if (!bigger) return 1;
      buf = bigger;
    }
    ssize_t r = read(0, buf + used, cap - used);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0; /* the service closed our stdin */
    used += (size_t)r;
    size_t off = 0;
    while (used - off >= 4) {
      unsigned char *h = (unsigned char *)buf + off;
      uint32_t len = h[0] | (h[1] << 8) | (h[2] << 16) | ((uint32_t)h[3] << 24);
      if (len > MAX_REQUEST) return 1;
      if (used - off - 4 < len) break;
      handle(buf + off + 4, len);
      if (own_pidns >= 0) setns(own_pidns, CLONE_NEWPID);
      off += 4 + len;
    }
    memmove(buf, buf + off, used - off);
    used -= off;
  }
}
