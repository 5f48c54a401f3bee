/*
 * sandbox-init: the long-lived process of a local sandbox (launch.ts), what
 * `sh -c 'echo ready >&4; exec 4>&-; exec /bin/sleep infinity'` was.
 *
 * bwrap runs it as the sandbox's pid 2 (its own reaper is pid 1) once the
 * sandbox is built, through /proc/self/fd/N: compute hands the launch an open
 * descriptor of this (static) binary, so it needs nothing of the sandbox's
 * root (an image without /bin/sh included) and costs one execve of a static
 * program instead of a dynamically linked shell and then sleep (each loads
 * the C library), on the path of every start and released resume.
 *
 * It writes "ready\n" on fd 4 (the service's readiness pipe: it runs inside
 * the finished sandbox), closes every descriptor above 2 (that pipe and the
 * one of its own binary), and then waits for a signal that ends it, holding
 * nothing else. Its end ends the sandbox, as sleep's did.
 */
#define _GNU_SOURCE
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
  static const char ready[] = "ready\n";
  (void)prctl(PR_SET_NAME, "sandbox-init", 0, 0, 0);
  if (write(4, ready, sizeof ready - 1) != (ssize_t)(sizeof ready - 1)) _exit(1);
  /* close_range(3, ~0U, 0): the readiness pipe and this binary's descriptor go. */
  if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
    for (int fd = 3; fd < 1024; fd++) close(fd);
  for (;;) pause();
}
