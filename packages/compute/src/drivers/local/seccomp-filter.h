#ifndef SANDBOX_SECCOMP_FILTER_H
#define SANDBOX_SECCOMP_FILTER_H

#include <linux/filter.h>

/* Writes the sandbox's filter as raw BPF (what bwrap --seccomp reads) to fd; 0 or -errno. */
int sandbox_seccomp_export(int fd);

/* The same program in memory, for seccomp(SECCOMP_SET_MODE_FILTER); 0 or -errno. */
int sandbox_seccomp_program(struct sock_fprog *prog);

#endif
