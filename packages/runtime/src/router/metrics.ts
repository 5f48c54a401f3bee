import { Gauge, Histogram, type Registry } from "@platform/rpc";
import type { ScaleState } from "../controller/controller.ts";
import type { TenantWaker } from "./waker.ts";

/** Cold starts: a spare worker answers in tens of ms, a new pod in seconds; the spec's wait is 10 s. */
const COLD_START_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 30];

/**
 * The router's cold starts as a histogram (what Knative users have asked
 * for, knative#13459): from EnsureReady to the worker answering health, by
 * how the worker was woken (`created`, `scaled-up`) and whether it answered
 * within the wait (`reached` true/false). Made before the waker, which calls it.
 */
export function coldStartRecorder(
  registry: Registry,
): (c: { ms: number; scaleState: ScaleState; reached: boolean }) => void {
  const histogram = new Histogram({
    name: "platform_runtime_tenant_cold_start_seconds",
    help: "Tenant worker cold starts: EnsureReady to the worker serving, by scale state and whether it answered in time",
    labelNames: ["scale_state", "reached"],
    buckets: COLD_START_BUCKETS,
    registers: [registry],
  });
  return ({ ms, scaleState, reached }) =>
    histogram.observe({ scale_state: scaleState, reached: String(reached) }, ms / 1000);
}

/** The wake queue, read from the waker at each scrape. */
export function registerWakerMetrics(registry: Registry, waker: TenantWaker): void {
  new Gauge({
    name: "platform_runtime_wake_queue_length",
    help: "Requests waiting for a tenant worker to wake (all tenants)",
    registers: [registry],
    collect() {
      this.set(waker.queue().waiting);
    },
  });
  new Gauge({
    name: "platform_runtime_wakes_in_flight",
    help: "Tenant wakes under way (one per tenant at most)",
    registers: [registry],
    collect() {
      this.set(waker.queue().wakes);
    },
  });
}
