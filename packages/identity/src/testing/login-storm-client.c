/*
 * A login storm from one process with little CPU per connection (issue 15
 * item 4): `count` connections opened at once, as that many clients would,
 * each writing one pre-built POST /v1/auth/login (its own email and
 * X-Forwarded-For address) as soon as it is connected, and reading one
 * answer. Non-blocking sockets on one epoll; no HTTP library.
 *
 *   login-storm-client HOST PORT COUNT PREFIX PASSWORD [TIMEOUT_MS]
 *
 * Prints what login-storm-client.mjs prints: a JSON array, one object per
 * login in order, {"status":N,"retryAfter":"1"|null,"ms":X} with the
 * milliseconds from its connect() to the last byte of its answer, or
 * {"status":0,"error":"ECONNRESET","ms":X} when there was no whole answer;
 * then a second line, {"cpuMs":X}, the CPU this process used.
 * Each connection carries one request, so an answer with neither a length
 * nor chunks ends at the server's close.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ANSWER_MAX 16384

struct conn {
  int fd;
  int state; /* 0 connecting, 1 written, 2 done */
  size_t req_len, req_off;
  char *req;
  char *buf;
  size_t len;
  double started, ms;
  int status;
  char retry_after[16];
  const char *error;
};

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static const char *errname(int e) {
  switch (e) {
    case ECONNRESET: return "ECONNRESET";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EPIPE: return "EPIPE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case EMFILE: return "EMFILE";
    default: return "ESOCKET";
  }
}

static void finish(int ep, struct conn *c, const char *error) {
  c->ms = now_ms() - c->started;
  c->error = error;
  c->state = 2;
  if (c->fd >= 0) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
  }
}

/* The answer is whole: its head, and the body its Content-Length says (or none). 1 whole, 0 not yet. */
static int whole(struct conn *c) {
  c->buf[c->len] = 0;
  char *end = strstr(c->buf, "\r\n\r\n");
  if (!end) return 0;
  size_t head = (size_t)(end - c->buf) + 4;
  if (strncmp(c->buf, "HTTP/1.", 7) != 0) return -1;
  c->status = atoi(c->buf + 9);
  long length = -1;
  int chunked = 0;
  for (char *line = strstr(c->buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
    char *h = line + 2;
    if (strncasecmp(h, "content-length:", 15) == 0) length = strtol(h + 15, NULL, 10);
    if (strncasecmp(h, "transfer-encoding:", 18) == 0 && strstr(h, "chunked") && strstr(h, "chunked") < end)
      chunked = 1;
    if (strncasecmp(h, "retry-after:", 12) == 0) {
      h += 12;
      while (*h == ' ') h++;
      size_t n = strcspn(h, "\r");
      if (n >= sizeof c->retry_after) n = sizeof c->retry_after - 1;
      memcpy(c->retry_after, h, n);
      c->retry_after[n] = 0;
      for (char *q = c->retry_after; *q; q++)
        if (*q == '"' || *q == '\\' || (unsigned char)*q < 32) *q = '?';
    }
  }
  /* A chunked body ends with its last, empty chunk (no trailers expected). */
  if (chunked) return c->len >= head + 5 && memcmp(c->buf + c->len - 5, "0\r\n\r\n", 5) == 0;
  if (length < 0) return 0; /* until the close */
  return c->len >= head + (size_t)length;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s HOST PORT COUNT PREFIX PASSWORD [TIMEOUT_MS [malformed]]\n", argv[0]);
    return 2;
  }
  const char *host = argv[1], *prefix = argv[4], *password = argv[5];
  int port = atoi(argv[2]), count = atoi(argv[3]);
  double timeout_ms = argc > 6 ? atof(argv[6]) : 120000;
  /* Bodies that are not JSON: the endpoint's cheapest answer (400), a storm's yardstick. */
  int malformed = argc > 7 && strcmp(argv[7], "malformed") == 0;
  struct rlimit rl = {(rlim_t)count + 64, (rlim_t)count + 64};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)count + 64) {
      fprintf(stderr, "cannot open %d descriptors (limit %lu)\n", count, (unsigned long)rl.rlim_cur);
      return 1;
    }
  }
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    fprintf(stderr, "not an IPv4 address: %s\n", host);
    return 2;
  }
  struct conn *conns = calloc(count, sizeof *conns);
  /* Every request and answer buffer made before the first connect. */
  for (int i = 0; i < count; i++) {
    char body[512];
    int blen = malformed ? snprintf(body, sizeof body, "{\"email\":\"%s-%d@storm.example.com\"", prefix, i)
                         : snprintf(body, sizeof body, "{\"email\":\"%s-%d@storm.example.com\",\"password\":\"%s\"}",
                                    prefix, i, password);
    conns[i].req = malloc(1024 + blen);
    conns[i].req_len = (size_t)snprintf(conns[i].req, 1024 + blen,
                                        "POST /v1/auth/login HTTP/1.1\r\nHost: %s:%d\r\n"
                                        "Content-Type: application/json\r\nContent-Length: %d\r\n"
                                        "X-Forwarded-For: 10.%d.%d.%d\r\n\r\n%s",
                                        host, port, blen, (i >> 16) & 255, (i >> 8) & 255, i & 255, body);
    conns[i].buf = malloc(ANSWER_MAX + 1);
    conns[i].fd = -1;
  }
  int ep = epoll_create1(0);
  int pending = count;
  for (int i = 0; i < count; i++) {
    struct conn *c = &conns[i];
    c->started = now_ms();
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd < 0) {
      finish(ep, c, errname(errno));
      pending--;
      continue;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0 && errno != EINPROGRESS) {
      finish(ep, c, errname(errno));
      pending--;
      continue;
    }
    struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
  }
  struct epoll_event events[512];
  double deadline = now_ms() + timeout_ms;
  while (pending > 0) {
    int left = (int)(deadline - now_ms());
    if (left <= 0) break;
    int n = epoll_wait(ep, events, 512, left);
    if (n < 0 && errno == EINTR) continue;
    for (int k = 0; k < n; k++) {
      struct conn *c = &conns[events[k].data.u32];
      if (c->state == 2) continue;
      uint32_t e = events[k].events;
      if (c->state == 0 && (e & EPOLLOUT)) {
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) {
          finish(ep, c, errname(err));
          pending--;
          continue;
        }
        ssize_t w = write(c->fd, c->req + c->req_off, c->req_len - c->req_off);
        if (w < 0 && errno != EAGAIN) {
          finish(ep, c, errname(errno));
          pending--;
          continue;
        }
        if (w > 0) c->req_off += (size_t)w;
        if (c->req_off == c->req_len) {
          c->state = 1;
          struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = events[k].data.u32};
          epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
      }
      if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        for (;;) {
          ssize_t r = read(c->fd, c->buf + c->len, ANSWER_MAX - c->len);
          if (r > 0) {
            c->len += (size_t)r;
            int w = whole(c);
            if (w != 0 || c->len == ANSWER_MAX) {
              finish(ep, c, w > 0 ? NULL : "EPROTO");
              pending--;
              break;
            }
            continue;
          }
          if (r == 0) {
            /* The server closed: an answer without a length ends here. */
            int w = c->len > 0 ? whole(c) : 0;
            finish(ep, c, c->status > 0 && w >= 0 ? NULL : "ECONNRESET");
            pending--;
          } else if (errno != EAGAIN) {
            finish(ep, c, errname(errno));
            pending--;
          }
          break;
        }
      }
    }
  }
  for (int i = 0; i < count; i++)
    if (conns[i].state != 2) finish(ep, &conns[i], "ETIMEDOUT");
  /* One JSON array on stdout. */
  fputc('[', stdout);
  for (int i = 0; i < count; i++) {
    struct conn *c = &conns[i];
    if (i) fputc(',', stdout);
    if (c->error)
      printf("{\"status\":0,\"error\":\"%s\",\"ms\":%.3f}", c->error, c->ms);
    else if (c->retry_after[0])
      printf("{\"status\":%d,\"retryAfter\":\"%s\",\"ms\":%.3f}", c->status, c->retry_after, c->ms);
    else
      printf("{\"status\":%d,\"retryAfter\":null,\"ms\":%.3f}", c->status, c->ms);
  }
  fputs("]\n", stdout);
  /* A second line: this process's own CPU (user + system), ms. */
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("{\"cpuMs\":%.1f}\n", (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                                  (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3);
  return 0;
}
