/*
 * exec-helper: the local driver's spawner of sandbox commands.
 *
 * One small long-lived root process per driver. Forking it costs a fraction
 * of forking the ~200 MB Node service, and each command is one fork + one
 * execve instead of sh -> nsenter -> command.
 *
 * Requests arrive on stdin, each a little-endian u32 length followed by
 * NUL-terminated fields, the first naming the request:
 *   X id init-pid init-start-time uid gid cwd stream-socket prepared-id input
 *     n-cgroups cgroup.procs-files... n-argv argv... n-env env("K=V")...
 *       runs a command (in the prepared child prepared-id when there is one);
 *       input: "-" stdin is /dev/null, "s" stdin is a third stream
 *       connection, "t<rows>,<cols>" the command runs on a pseudo-terminal;
 *   W id rows cols
 *       resizes the terminal of the running command id, then reports
 *       R id (also when there is none), so the service answers the resize
 *       only once typed input meets the new size;
 *   P id init-pid init-start-time uid gid n-cgroups cgroup.procs-files... [stream-socket]
 *       forks a child that joins those cgroups, enters the sandbox and waits
 *       for an X naming it (killing it is how an unused one ends); with a
 *       stream socket, the helper also connects that X's stdout and stderr
 *       now, untagged, and keeps them (never the child) until the X comes,
 *       when it writes their tags: no connection is made on the exec's way. An X that
 *       comes before that child said ready waits for it (parked, PARK_MS at
 *       most, the helper serving other requests meanwhile) instead of
 *       killing it and forking another that would wait for the same cgroup
 *       move; a child that ends or is late leaves the X to start the usual way.
 * For X, the helper connects twice to the stream socket (the service listens
 * there; or takes the two its prepared child's P made) and writes a 5-byte tag on each (u32 id, 1 = stdout, 2 = stderr);
 * those connections become the command's fd 1 and 2, so output goes straight
 * from the command to the service with the kernel's socket buffer as
 * backpressure. With input "s" a third connection (tag 3) becomes its fd 0
 * (what the service writes there is the command's stdin; its end, EOF). With
 * "t" the helper opens a pseudo-terminal of that size: the slave becomes the
 * command's fd 0, 1 and 2 and controlling terminal, and a relay process
 * (forked from the helper, as nobody) copies the master to the stdout
 * connection and what the service writes on that connection to the master;
 * the stderr connection only carries failures before the command runs. The
 * helper keeps the master for W (TIOCSWINSZ, the command gets SIGWINCH). A child joins the exec's cgroups before anything of the
 * command runs, enters the init's namespaces through a pidfd (checked against
 * the start time, so a reused pid is never entered), and drops to the
 * sandbox uid with no capabilities, no supplementary groups and
 * no_new_privs, and last installs the sandbox's seccomp filter
 * (seccomp-filter.c): entering with setns, it does not inherit the init's.
 *
 * Reports, one line each on stdout:
 *   E <id> <exit code> <signal number>   the command ended
 *   R <id>                               its W was applied
 *   F <id> <message>                     it could not be started
 * The helper exits when stdin closes (the service went away); running
 * commands are not affected, prepared children see their socket close and exit.
 *
 * `exec-helper --seccomp-bpf` prints the filter as raw BPF and exits: what
 * the driver hands to bwrap --seccomp for the sandbox's init.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "seccomp-filter.h"

#define MAX_REQUEST (4u << 20)
#define MAX_FIELDS 65536
#define MAX_RUNNING 65536
#define STREAM_BUFFER_BYTES (1 << 20)

extern char **environ;

struct running {
  pid_t pid;
  uint32_t id;
  /* The terminal's master (for W), or -1. */
  int master;
};

static struct running running[MAX_RUNNING];
static size_t n_running;

/* Built once at start; without it the helper does not run at all. */
static struct sock_fprog seccomp_program;

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

/* Writes an exec's 5-byte tag (u32 id, kind) on a stream connection; -1 when it cannot. */
static int write_tag(int fd, uint32_t id, uint8_t kind) {
  unsigned char tag[5] = {id & 0xff, (id >> 8) & 0xff, (id >> 16) & 0xff, (id >> 24) & 0xff, kind};
  return write(fd, tag, sizeof tag) == sizeof tag ? 0 : -1;
}

/* A connection to the stream socket, not tagged yet (-1 and errno on failure). */
static int connect_untagged(const char *path) {
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
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

static int connect_stream(const char *path, uint32_t id, uint8_t kind) {
  int fd = connect_untagged(path);
  if (fd >= 0 && write_tag(fd, id, kind) < 0) {
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

/*
 * In a forked child, already in the sandbox's pid namespace: joins the exec's
 * cgroups (so it is counted and killable before anything of the command
 * runs), enters the init's other namespaces and becomes the sandbox user with
 * no capabilities, no supplementary groups and no_new_privs. Dies on failure.
 */
static void enter_sandbox(int pidfd, uid_t uid, gid_t gid, char **cgroups, size_t n_cgroups) {
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
  /* Last: from here on only what the command itself needs (dup2, chdir, execve). */
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &seccomp_program) < 0) die("seccomp filter", errno, 126);
}

/*
 * Inside the sandbox: stdin from in, output to out/err (a terminal: in is its
 * slave, fd 0, 1 and 2 and the controlling terminal), then the command.
 * Never returns.
 */
static void run_command(int in, int out, int err, int terminal, const char *cwd, char **argv, char **envp) {
  /* Above 2 first, so placing one cannot overwrite another. */
  if (in <= 2) in = fcntl(in, F_DUPFD_CLOEXEC, 3);
  if (out <= 2) out = fcntl(out, F_DUPFD_CLOEXEC, 3);
  if (err <= 2) err = fcntl(err, F_DUPFD_CLOEXEC, 3);
  if (in < 0 || out < 0 || err < 0 || dup2(err, 2) < 0) _exit(126);
  if (terminal) {
    /* A session leader already (enter_sandbox): the slave becomes its controlling terminal. */
    if (ioctl(in, TIOCSCTTY, 0) < 0) die("terminal", errno, 126);
    if (dup2(in, 0) < 0 || dup2(in, 1) < 0 || dup2(in, 2) < 0) _exit(126);
  } else if (dup2(in, 0) < 0 || dup2(out, 1) < 0) {
    _exit(126);
  }
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

/* NUL-separated fields of buf[0..len) into fields; 0 when buf does not end in NUL. */
static size_t split(char *buf, size_t len, char **fields, size_t max) {
  size_t n = 0;
  if (len == 0 || buf[len - 1] != 0) return 0;
  for (char *p = buf; p < buf + len && n < max;) {
    fields[n++] = p;
    p += strlen(p) + 1;
  }
  return n;
}

/* "n, n items" at fields[*i]: a NULL-terminated copy of the items, or NULL. */
static char **list_at(char **fields, size_t n, size_t *i) {
  if (*i >= n) return NULL;
  size_t count = strtoul(fields[(*i)++], NULL, 10);
  if (count > n - *i) return NULL;
  char **list = calloc(count + 1, sizeof *list);
  if (list) memcpy(list, &fields[*i], count * sizeof *list);
  *i += count;
  return list;
}

/*
 * A prepared child: forked ahead of an exec (when its cgroup is made), it has
 * already joined that cgroup and entered the sandbox, which is where an exec
 * would otherwise wait (the first cgroup move after a quiet spell waits for an
 * RCU grace period, several ms). It waits on its socket for the command and
 * its two output streams, then execs it.
 */
struct parked;

struct prepared {
  uint32_t id;
  pid_t pid;
  int sock;
  /* Its exec's stdout and stderr connections, made with it (untagged; held by
   * the helper, never by the child, until the exec comes), or -1. */
  int out, err;
  /* An exec that came while this child was still on its way in: it waits here (parked) for the child's "R". */
  struct parked *parked;
};

static struct prepared prepared[MAX_RUNNING];
static size_t n_prepared;

/*
 * An exec whose prepared child had not said ready yet: its request (a copy)
 * and the descriptors already made for it, kept by the helper (never by the
 * child) until the child says ready (it gets them then), ends or misses the
 * deadline (the exec then starts the usual way). Meanwhile the helper serves
 * other requests: a child held back (a sandbox can stop or kill its own)
 * delays only this exec, by at most PARK_MS.
 */
struct parked {
  char *req;
  size_t len;
  int in, out, err, master;
  long long deadline_ns;
};

/*
 * Well beyond a prepared child's way in (one cgroup migration's RCU grace
 * period: a few ms, tens under load), which a new child would wait too.
 */
#define PARK_MS 200

/* The command as the prepared child receives it: u32 length, fields (input mode, cwd, argv, env), and in/out/err as SCM_RIGHTS. */
static void await_command(int sock) {
  uint32_t len;
  int fds[3];
  char control[CMSG_SPACE(sizeof fds)];
  struct iovec iov = {&len, sizeof len};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  ssize_t r;
  while ((r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL)) < 0 && errno == EINTR) {
  }
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  if (r != sizeof len || !c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof fds) || len > MAX_REQUEST) _exit(0);
  memcpy(fds, CMSG_DATA(c), sizeof fds);
  char *buf = malloc(len);
  for (size_t got = 0; buf && got < len;) {
    ssize_t n = read(sock, buf + got, len - got);
    if (n == 0 || (n < 0 && errno != EINTR)) _exit(126);
    if (n > 0) got += (size_t)n;
  }
  static char *fields[MAX_FIELDS];
  size_t n = buf ? split(buf, len, fields, MAX_FIELDS) : 0, i = 2;
  char **argv = list_at(fields, n, &i), **envp = list_at(fields, n, &i);
  if (n < 2 || !argv || !argv[0] || !envp) _exit(126);
  run_command(fds[0], fds[1], fds[2], fields[0][0] == 't', fields[1], argv, envp);
}

/* buf: u32 length and the fields; in, out and err go as SCM_RIGHTS with its first bytes. */
static int send_command(int sock, int in, int out, int err, const char *buf, size_t total) {
  int fds[3] = {in, out, err};
  char control[CMSG_SPACE(sizeof fds)];
  memset(control, 0, sizeof control);
  struct iovec iov = {(void *)buf, total};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t w = sendmsg(sock, &msg, MSG_NOSIGNAL);
  if (w <= 0) return -1;
  for (size_t sent = (size_t)w; sent < total;) {
    ssize_t n = send(sock, buf + sent, total - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    sent += (size_t)n;
  }
  return 0;
}

static struct prepared *find_prepared(uint32_t id) {
  for (size_t i = 0; i < n_prepared; i++)
    if (prepared[i].id == id) return &prepared[i];
  return NULL;
}

/*
 * In a child just forked from the helper: the stream connections made ahead
 * for other execs are not its to hold (a copy would keep the service from
 * seeing their end until it reached its own close_range).
 */
static void close_premade_streams(void) {
  for (size_t i = 0; i < n_prepared; i++) {
    if (prepared[i].out >= 0) close(prepared[i].out);
    if (prepared[i].err >= 0) close(prepared[i].err);
  }
}

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void start_command(char *req, size_t len, int in, int out, int err, int master, struct prepared *p);

/*
 * Forgets p (killing it first when kill_it); an exec parked on it starts the
 * usual way. p's slot is reused, so p must not be used after this.
 */
static void drop_prepared(struct prepared *p, int kill_it) {
  if (kill_it) kill(p->pid, SIGKILL);
  close(p->sock);
  if (p->out >= 0) close(p->out);
  if (p->err >= 0) close(p->err);
  struct parked *k = p->parked;
  *p = prepared[--n_prepared];
  if (k) {
    start_command(k->req, k->len, k->in, k->out, k->err, k->master, NULL);
    free(k->req);
    free(k);
  }
}

/* Its "R" (it is in the sandbox and filtered): 1 once read, 0 not yet, -1 it never will (gone, or it said something else). */
static int prepared_ready(struct prepared *p) {
  char ready;
  ssize_t r = recv(p->sock, &ready, 1, MSG_DONTWAIT);
  if (r == 1) return ready == 'R' ? 1 : -1;
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  return -1;
}

/* P id init start uid gid n-cgroups cgroups... [stream-socket] */
static void prepare(char **f, size_t n) {
  if (n < 7 || n_prepared == MAX_RUNNING) return;
  uint32_t id = (uint32_t)strtoul(f[1], NULL, 10);
  size_t i = 6;
  char **cgroups = list_at(f, n, &i);
  int pidfd = pidfd_open_checked((pid_t)strtol(f[2], NULL, 10), f[3]);
  int pair[2] = {-1, -1};
  if (!cgroups || pidfd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0 || setns(pidfd, CLONE_NEWPID) < 0) goto done;
  pid_t pid = fork();
  if (pid == 0) {
    close_premade_streams();
    close(pair[0]);
    /* Its failures are not an exec's: when it cannot get ready it just ends. */
    int quiet = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (quiet < 0 || dup2(quiet, 2) < 0) _exit(126);
    enter_sandbox(pidfd, (uid_t)strtoul(f[4], NULL, 10), (gid_t)strtoul(f[5], NULL, 10), cgroups, strtoul(f[6], NULL, 10));
    /* Keep only its own socket (as fd 3) and stderr: holding the helper's pipes
     * or other prepared children's sockets would keep them from seeing an end. */
    if (pair[1] != 3 && (dup2(pair[1], 3) < 0)) _exit(126);
    syscall(SYS_close_range, 4, ~0u, 0);
    int nul = open("/dev/null", O_RDWR);
    if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0) _exit(126);
    close(nul);
    /* Ready: the helper hands an exec only to a child that said so. */
    if (write(3, "R", 1) != 1) _exit(126);
    await_command(3);
  }
  if (pid > 0) {
    /* Its exec's output connections, made now rather than on the exec's way
     * (tagged when it comes); without them the exec connects as usual. */
    const char *sock = i < n ? f[i] : NULL;
    int out = sock ? connect_untagged(sock) : -1, err = out >= 0 ? connect_untagged(sock) : -1;
    if (err < 0 && out >= 0) {
      close(out);
      out = -1;
    }
    prepared[n_prepared++] = (struct prepared){id, pid, pair[0], out, err, NULL};
    pair[0] = -1;
  }
done:
  if (pair[0] >= 0) close(pair[0]);
  if (pair[1] >= 0) close(pair[1]);
  if (pidfd >= 0) close(pidfd);
  free(cgroups);
}

/* Writes all of buf to fd; -1 when it cannot. */
static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    buf += w;
    len -= (size_t)w;
  }
  return 0;
}

/*
 * The relay of a terminal (its own process, forked from the helper before
 * anything enters the sandbox): the master's output to the stream socket,
 * what the service writes on the socket to the master (held while the
 * terminal's input queue is full, so output keeps flowing meanwhile). Ends
 * when the terminal has no slave left (EIO: the command and everything it
 * started are gone) or the service is gone. Never returns.
 */
static void relay(int master, int sock) {
  static char out[65536], in[65536];
  size_t in_len = 0, in_off = 0;
  int sock_open = 1;
  fcntl(master, F_SETFL, O_NONBLOCK);
  for (;;) {
    struct pollfd p[2] = {
        {.fd = master, .events = POLLIN | (in_off < in_len ? POLLOUT : 0)},
        {.fd = sock_open && in_off == in_len ? sock : -1, .events = POLLIN},
    };
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = read(master, out, sizeof out);
      if (n > 0) {
        if (write_all(sock, out, (size_t)n) < 0) break;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        break; /* EIO: no slave is open any more */
      }
    }
    if ((p[0].revents & POLLOUT) && in_off < in_len) {
      ssize_t n = write(master, in + in_off, in_len - in_off);
      if (n > 0) in_off += (size_t)n;
      else if (n < 0 && errno != EAGAIN && errno != EINTR) in_off = in_len;
    }
    if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = read(sock, in, sizeof in);
      if (n > 0) {
        in_len = (size_t)n;
        in_off = 0;
      } else if (n == 0) {
        sock_open = 0; /* the service closed the input (eof); output goes on */
      } else if (errno != EINTR && errno != EAGAIN) {
        break;
      }
    }
  }
  _exit(0);
}

/*
 * A pseudo-terminal of rows x cols: its master in *master, its slave
 * returned, and a relay process between the master and out. -1 on failure
 * (errno set), nothing left open.
 */
static int open_terminal(const char *size, int out, int *master) {
  unsigned rows = 0, cols = 0;
  if (sscanf(size, "%u,%u", &rows, &cols) != 2 || rows == 0 || cols == 0 || rows > 65535 || cols > 65535) {
    errno = EINVAL;
    return -1;
  }
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0) return -1;
  struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
  int slave = -1;
  if (unlockpt(m) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0 ||
      (slave = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
    int e = errno;
    close(m);
    errno = e;
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    /* Only the master and the socket, as nobody: holding the helper's pipes
     * or the slave would keep them from seeing an end. */
    if (dup2(m, 3) < 0 || dup2(out, 4) < 0) _exit(1);
    syscall(SYS_close_range, 5, ~0u, 0);
    int nul = open("/dev/null", O_RDWR);
    if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0) _exit(1);
    if (nul > 4) close(nul);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0) _exit(1);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    relay(3, 4);
  }
  if (pid < 0) {
    int e = errno;
    close(slave);
    close(m);
    errno = e;
    return -1;
  }
  *master = m;
  return slave;
}

/* W id rows cols */
static void resize_terminal(char **f, size_t n) {
  if (n < 4) return;
  uint32_t id = (uint32_t)strtoul(f[1], NULL, 10);
  struct winsize ws = {.ws_row = (unsigned short)strtoul(f[2], NULL, 10), .ws_col = (unsigned short)strtoul(f[3], NULL, 10)};
  for (size_t i = 0; i < n_running; i++)
    if (running[i].id == id && running[i].master >= 0) ioctl(running[i].master, TIOCSWINSZ, &ws);
  /* Still parked: its terminal is made already. */
  for (size_t i = 0; i < n_prepared; i++) {
    struct parked *k = prepared[i].parked;
    if (k && k->master >= 0 && k->len > 4 && strtoul(k->req + 2, NULL, 10) == id) ioctl(k->master, TIOCSWINSZ, &ws);
  }
  report("R %u\n", id);
}

/*
 * The fields of an X request (req[0..len), NUL-separated): f[1] id, f[2]
 * init pid, f[3] its start time, f[4] uid, f[5] gid, f[6] cwd, f[7] stream
 * socket, f[8] prepared id, f[9] input mode, then the lists.
 */
struct exec_fields {
  char *f[MAX_FIELDS];
  size_t n;
  uint32_t id;
  const char *cwd, *sock, *mode;
  int terminal;
  size_t n_cg, argv_at;
  char **cgroups, **argv, **envp;
};

/* Frees the lists parse_exec allocated in x. */
static void free_exec_lists(struct exec_fields *x) {
  free(x->cgroups);
  free(x->argv);
  free(x->envp);
  x->cgroups = x->argv = x->envp = NULL;
}

/* Closes an exec's descriptors not handed on (-1: none). */
static void close_exec_fds(int master, int in, int out, int err) {
  if (master >= 0) close(master);
  if (in >= 0) close(in);
  if (out >= 0) close(out);
  if (err >= 0) close(err);
}

/* 0 when req is a whole X request (the lists allocated in x), -1 when not (nothing left allocated). */
static int parse_exec(char *req, size_t len, struct exec_fields *x) {
  x->n = split(req, len, x->f, MAX_FIELDS);
  x->cgroups = x->argv = x->envp = NULL;
  if (x->n < 13) return -1;
  char **f = x->f;
  x->id = (uint32_t)strtoul(f[1], NULL, 10);
  x->cwd = f[6];
  x->sock = f[7];
  x->mode = f[9];
  x->terminal = x->mode[0] == 't';
  size_t i = 10;
  x->n_cg = strtoul(f[10], NULL, 10);
  x->cgroups = list_at(f, x->n, &i);
  x->argv_at = i;
  x->argv = list_at(f, x->n, &i);
  x->envp = list_at(f, x->n, &i);
  if (!x->cgroups || !x->argv || !x->argv[0] || !x->envp || (x->mode[0] != '-' && x->mode[0] != 's' && !x->terminal)) {
    free_exec_lists(x);
    return -1;
  }
  return 0;
}

static struct exec_fields parsed;

/*
 * Starts the command of X request req with its descriptors made (in, out,
 * err, and a terminal's master or -1; all closed here): handed to p, a
 * prepared child that said ready, or (p NULL, or the hand-over failed) in a
 * child forked now. Reports F when it cannot start.
 */
static void start_command(char *req, size_t len, int in, int out, int err, int master, struct prepared *p) {
  struct exec_fields *x = &parsed;
  int pidfd = -1;
  if (parse_exec(req, len, x) < 0) {
    report("F 0 malformed request\n");
    goto done;
  }
  char **f = x->f;
  uint32_t id = x->id;
  if (n_running == MAX_RUNNING) {
    if (p) drop_prepared(p, 1);
    report("F %u malformed request\n", id);
    goto done;
  }
  if (p) {
    /* Hand the command to the prepared child: input mode, cwd, then argv and env as they came. */
    size_t mode_len = strlen(x->mode) + 1, cwd_len = strlen(x->cwd) + 1, rest = len - (size_t)(f[x->argv_at] - req);
    uint32_t blen = (uint32_t)(mode_len + cwd_len + rest);
    char *buf = malloc(sizeof blen + blen);
    int sent = -1;
    if (buf) {
      memcpy(buf, &blen, sizeof blen);
      memcpy(buf + sizeof blen, x->mode, mode_len);
      memcpy(buf + sizeof blen + mode_len, x->cwd, cwd_len);
      memcpy(buf + sizeof blen + mode_len + cwd_len, f[x->argv_at], rest);
      sent = send_command(p->sock, in, out, err, buf, sizeof blen + blen);
      free(buf);
    }
    if (sent == 0) {
      running[n_running++] = (struct running){p->pid, id, master};
      master = -1;
      drop_prepared(p, 0);
      goto done;
    }
    drop_prepared(p, 1); /* gone or stuck: start the usual way */
  }
  pidfd = pidfd_open_checked((pid_t)strtol(f[2], NULL, 10), f[3]);
  if (pidfd < 0) {
    report("F %u the sandbox init is gone: %s\n", id, strerror(errno));
    goto done;
  }
  /* Children forked from here on are born in the sandbox's pid namespace. */
  if (setns(pidfd, CLONE_NEWPID) < 0) {
    report("F %u entering the pid namespace: %s\n", id, strerror(errno));
    goto done;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close_premade_streams();
    /* Errors from here on belong on the exec's stderr. */
    if (dup2(err, 2) < 0) _exit(126);
    enter_sandbox(pidfd, (uid_t)strtoul(f[4], NULL, 10), (gid_t)strtoul(f[5], NULL, 10), x->cgroups, x->n_cg);
    run_command(in, out, err, x->terminal, x->cwd, x->argv, x->envp);
  }
  if (pid < 0) {
    report("F %u fork: %s\n", id, strerror(errno));
    goto done;
  }
  running[n_running++] = (struct running){pid, id, master};
  master = -1;
done:
  /* A terminal's master stays only with a running command (and its relay). */
  close_exec_fds(master, in, out, err);
  if (pidfd >= 0) close(pidfd);
  free_exec_lists(x);
}

/* X id init start uid gid cwd stream-socket prepared-id input n-cgroups cgroups... n-argv argv... n-env env... */
static void exec_command(char *req, size_t len) {
  struct exec_fields *x = &parsed;
  int in = -1, out = -1, err = -1, master = -1;
  if (parse_exec(req, len, x) < 0) {
    report("F %u malformed request\n", x->n > 1 ? (uint32_t)strtoul(x->f[1], NULL, 10) : 0u);
    return;
  }
  uint32_t id = x->id;
  const char *mode = x->mode;
  struct prepared *p = find_prepared((uint32_t)strtoul(x->f[8], NULL, 10));
  if (n_running == MAX_RUNNING) {
    report("F %u malformed request\n", id);
    goto fail;
  }
  if (p && p->out >= 0) {
    /* Made with the prepared child: only tagged now (a failed tag: connected as usual). */
    out = p->out;
    err = p->err;
    p->out = p->err = -1;
    if (write_tag(out, id, 1) < 0 || write_tag(err, id, 2) < 0) {
      close(out);
      close(err);
      out = err = -1;
    }
  }
  if (out < 0) out = connect_stream(x->sock, id, 1);
  if (err < 0) err = out < 0 ? -1 : connect_stream(x->sock, id, 2);
  if (err < 0) {
    report("F %u stream socket: %s\n", id, strerror(errno));
    goto fail;
  }
  if (mode[0] == 's') {
    in = connect_stream(x->sock, id, 3);
    if (in < 0) {
      report("F %u stream socket: %s\n", id, strerror(errno));
      goto fail;
    }
  } else if (x->terminal) {
    /* Before anything enters the sandbox's pid namespace: the relay is the host's. */
    in = open_terminal(mode + 1, out, &master);
    if (in < 0) {
      report("F %u terminal: %s\n", id, strerror(errno));
      goto fail;
    }
  } else {
    in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0) {
      report("F %u /dev/null: %s\n", id, strerror(errno));
      goto fail;
    }
  }
  free_exec_lists(x);
  int ready = p && !p->parked ? prepared_ready(p) : -1;
  if (ready == 0) {
    /* On its way in (its cgroup move waits for an RCU grace period): a new
     * child would wait the same and more, so the exec waits for this one. */
    struct parked *k = malloc(sizeof *k);
    char *copy = k ? malloc(len) : NULL;
    if (copy) {
      memcpy(copy, req, len);
      *k = (struct parked){copy, len, in, out, err, master, now_ns() + PARK_MS * 1000000LL};
      p->parked = k;
      return;
    }
    free(k);
    ready = -1;
  }
  if (ready < 0 && p && !p->parked) {
    /* Gone, or it will never be in (its cgroup was renamed or the sandbox ended under it). */
    drop_prepared(p, 1);
  }
  start_command(req, len, in, out, err, master, ready == 1 ? p : NULL);
  return;
fail:
  close_exec_fds(master, in, out, err);
  free_exec_lists(x);
}

/*
 * A parked exec's prepared child said ready (ready 1), went away or said
 * something else (-1), or missed the deadline (0): the exec starts, in that
 * child or the usual way.
 */
static void unpark(struct prepared *p, int ready) {
  struct parked *k = p->parked;
  p->parked = NULL;
  if (ready == 1) {
    start_command(k->req, k->len, k->in, k->out, k->err, k->master, p);
  } else {
    drop_prepared(p, 1);
    start_command(k->req, k->len, k->in, k->out, k->err, k->master, NULL);
  }
  free(k->req);
  free(k);
}

static void handle(char *req, size_t len) {
  static char *fields[MAX_FIELDS];
  size_t n = split(req, len, fields, MAX_FIELDS);
  if (n == 0) {
    report("F 0 malformed request\n");
  } else if (strcmp(fields[0], "X") == 0) {
    exec_command(req, len);
  } else if (strcmp(fields[0], "P") == 0) {
    prepare(fields, n);
  } else if (strcmp(fields[0], "W") == 0) {
    resize_terminal(fields, n);
  }
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (size_t i = 0; i < n_prepared; i++) {
      if (prepared[i].pid == pid) {
        drop_prepared(&prepared[i], 0); /* killed before it was used */
        break;
      }
    }
    for (size_t i = 0; i < n_running; i++) {
      if (running[i].pid != pid) continue;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      report("E %u %d %d\n", running[i].id, code, sig);
      if (running[i].master >= 0) close(running[i].master);
      running[i] = running[--n_running];
      break;
    }
  }
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--seccomp-bpf") == 0) {
    int rc = sandbox_seccomp_export(1);
    if (rc != 0) fprintf(stderr, "exec-helper: seccomp filter: %s\n", strerror(-rc));
    return rc == 0 ? 0 : 1;
  }
  int rc = sandbox_seccomp_program(&seccomp_program);
  if (rc != 0) {
    fprintf(stderr, "exec-helper: seccomp filter: %s\n", strerror(-rc));
    return 1;
  }
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
  /* stdin, SIGCHLD, and the prepared children that parked execs wait on. */
  static struct pollfd fds[2 + MAX_RUNNING];
  static uint32_t waited[MAX_RUNNING];
  for (;;) {
    fds[0] = (struct pollfd){.fd = 0, .events = POLLIN};
    fds[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
    size_t n_waited = 0;
    long long now = now_ns(), next = -1;
    for (size_t i = 0; i < n_prepared; i++) {
      if (!prepared[i].parked) continue;
      waited[n_waited] = prepared[i].id;
      fds[2 + n_waited++] = (struct pollfd){.fd = prepared[i].sock, .events = POLLIN};
      long long left = prepared[i].parked->deadline_ns - now;
      if (next < 0 || left < next) next = left < 0 ? 0 : left;
    }
    int timeout = next < 0 ? -1 : (int)((next + 999999) / 1000000);
    if (poll(fds, 2 + n_waited, timeout) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    /* A parked exec starts once its child said ready, went away or is late. */
    now = now_ns();
    for (size_t i = 0; i < n_waited; i++) {
      struct prepared *p = find_prepared(waited[i]);
      if (!p || !p->parked) continue;
      int ready = fds[2 + i].revents ? prepared_ready(p) : 0;
      if (ready != 0 || p->parked->deadline_ns <= now) unpark(p, ready);
      if (own_pidns >= 0) setns(own_pidns, CLONE_NEWPID);
    }
    if (fds[1].revents) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == sizeof si) {
      }
      reap();
      if (own_pidns >= 0) setns(own_pidns, CLONE_NEWPID);
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
