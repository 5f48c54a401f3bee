import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status } from "@platform/gen/grpc/health/v1/health_pb";

export { Status as ServingStatus };

type Listener = (status: Status) => void;

/**
 * Serving status per service name ("" is the whole server), as served by
 * grpc.health.v1.Health. Servers flip services between SERVING and
 * NOT_SERVING; Watch streams every change.
 */
export class HealthRegistry {
  private readonly statuses = new Map<string, Status>();
  private readonly listeners = new Map<string, Set<Listener>>();

  set(service: string, status: Status): void {
    if (this.statuses.get(service) === status) return;
    this.statuses.set(service, status);
    for (const l of this.listeners.get(service) ?? []) l(status);
  }

  get(service: string): Status | undefined {
    return this.statuses.get(service);
  }

  setServing(service = ""): void {
    this.set(service, Status.SERVING);
  }

  setNotServing(service = ""): void {
    this.set(service, Status.NOT_SERVING);
  }

  /** Sets every known service (and "") to `status`. */
  setAll(status: Status): void {
    for (const name of [...this.statuses.keys()]) this.set(name, status);
  }

  services(): string[] {
    return [...this.statuses.keys()];
  }

  subscribe(service: string, l: Listener): () => void {
    let set = this.listeners.get(service);
    if (!set) this.listeners.set(service, (set = new Set()));
    set.add(l);
    return () => set.delete(l);
  }
}

/** grpc.health.v1.Health over a registry of per-service statuses. */
export function healthService(registry: HealthRegistry): ServiceImpl<typeof Health> {
  return {
    check(req) {
      const status = registry.get(req.service);
      if (status === undefined) throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
      return { status };
    },
    async *watch(req, ctx) {
      // Changes queue up while the consumer is slow; only the latest matters
      // to a health watcher, but every distinct status is delivered in order.
      const queue: Status[] = [];
      let wake: (() => void) | undefined;
      const unsubscribe = registry.subscribe(req.service, (s) => {
        queue.push(s);
        wake?.();
      });
      const onAbort = () => wake?.();
      ctx.signal.addEventListener("abort", onAbort);
      try {
        let last = registry.get(req.service) ?? Status.SERVICE_UNKNOWN;
        yield { status: last };
        while (!ctx.signal.aborted) {
          if (queue.length === 0) await new Promise<void>((r) => (wake = r));
          wake = undefined;
          while (queue.length > 0) {
            const s = queue.shift()!;
            if (s !== last) {
              last = s;
              yield { status: s };
            }
          }
        }
      } finally {
        unsubscribe();
        ctx.signal.removeEventListener("abort", onAbort);
      }
    },
  };
}
