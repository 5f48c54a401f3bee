import { context, propagation, trace } from "@opentelemetry/api";

/** What startTracing returns: flush and stop exporting (a service's last step before exit). */
export interface Tracing {
  readonly enabled: boolean;
  shutdown(): Promise<void>;
}

interface Provider {
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}

let provider: Provider | undefined;

/** Whether this process exports spans (startTracing was given an endpoint). */
export function tracingEnabled(): boolean {
  return provider !== undefined;
}

/**
 * Exports this process's spans over OTLP/HTTP (JSON) to `endpoint`, the
 * specification's OTEL_EXPORTER_OTLP_ENDPOINT: a base URL, `/v1/traces` is
 * appended as the OpenTelemetry specification says for the all-signals
 * setting. Empty or unset: nothing is loaded or registered, so a service
 * without an endpoint pays nothing (the SDK is imported only here, on demand).
 * Registers the provider globally: the AsyncLocalStorage context manager
 * carries the active span across awaits, W3C trace context is the propagator.
 */
export async function startTracing(options: { serviceName: string; endpoint?: string }): Promise<Tracing> {
  const endpoint = options.endpoint?.trim();
  if (!endpoint) return { enabled: false, shutdown: async () => {} };
  if (provider) throw new Error("startTracing: tracing is already started in this process");
  const [{ NodeTracerProvider }, { BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }, semconv] =
    await Promise.all([
      import("@opentelemetry/sdk-trace-node"),
      import("@opentelemetry/sdk-trace-base"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/semantic-conventions"),
    ]);
  const { PreferredTraceIds } = await import("./trace-ids.ts");
  const exporter = new OTLPTraceExporter({ url: `${endpoint.replace(/\/+$/, "")}/v1/traces` });
  const node = new NodeTracerProvider({
    resource: resourceFromAttributes({ [semconv.ATTR_SERVICE_NAME]: options.serviceName }),
    idGenerator: new PreferredTraceIds(),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  node.register();
  provider = node;
  return {
    enabled: true,
    async shutdown() {
      if (provider !== node) return;
      provider = undefined;
      await node.shutdown().catch(() => {});
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/**
 * Sends the spans ended so far (a server's close calls it, so a service
 * stopping on SIGTERM loses none). Bounded: an unreachable collector must not
 * hold a shutdown up.
 */
export async function flushTracing(timeoutMs = 5_000): Promise<void> {
  if (!provider) return;
  const timer = new Promise<void>((r) => setTimeout(r, timeoutMs).unref());
  await Promise.race([provider.forceFlush().catch(() => {}), timer]);
}
