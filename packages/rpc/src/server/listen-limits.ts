/**
 * Pending connections the kernel holds for a listener (capped by
 * net.core.somaxconn). Node's default, 511, drops the SYNs of a burst beyond
 * it, and their clients retry after 1, 3, 7, 15 s: a storm of 2,000 clients
 * then waits tens of seconds in the kernel for an answer the service would
 * give (a 503 when it is overloaded) in milliseconds.
 */
export const LISTEN_BACKLOG = 4096;

/**
 * Streams one HTTP/2 connection may have open at once (SETTINGS
 * MAX_CONCURRENT_STREAMS; Node's default is 2^32 - 1, no bound). Beyond it a
 * client waits for one of its own streams to end (or is refused the stream),
 * so one connection cannot pile up unbounded work and per-stream buffers in
 * the service. A thousand is far above what the platform's own callers
 * multiplex on a connection (agents' token checks and exec streams).
 */
export const MAX_CONCURRENT_STREAMS = 1000;
