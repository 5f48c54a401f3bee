import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

/** One span as an OTLP/HTTP JSON export carries it, with its service's name. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: number;
}

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };

const anyValue = (v: AnyValue): string | number | boolean =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue ?? ""));
const attributesOf = (kvs: KeyValue[] = []) => Object.fromEntries(kvs.map((kv) => [kv.key, anyValue(kv.value)]));

/**
 * A minimal OTLP/HTTP trace receiver on 127.0.0.1 (the protocol's JSON
 * encoding, what @opentelemetry/exporter-trace-otlp-http sends): POST
 * /v1/traces with an ExportTraceServiceRequest, answered 200 `{}`. Anything
 * else is 404/415 and recorded in `refused`, so a test sees a misdirected
 * exporter instead of silently missing spans.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly refused: string[] = [];
  #server: Server | undefined;
  #waiters: (() => void)[] = [];

  async start(): Promise<string> {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const type = req.headers["content-type"] ?? "";
        if (req.method !== "POST" || req.url !== "/v1/traces") {
          this.refused.push(`${req.method} ${req.url}`);
          res.writeHead(404).end();
          return;
        }
        if (!type.startsWith("application/json")) {
          this.refused.push(`content-type ${type}`);
          res.writeHead(415).end();
          return;
        }
        let body = Buffer.concat(chunks);
        if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
        this.#take(JSON.parse(body.toString("utf8")));
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    await new Promise<void>((r) => this.#server!.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  #take(request: {
    resourceSpans?: {
      resource?: { attributes?: KeyValue[] };
      scopeSpans?: {
        spans?: {
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          name: string;
          kind: number;
          attributes?: KeyValue[];
          status?: { code?: number };
        }[];
      }[];
    }[];
  }): void {
    for (const rs of request.resourceSpans ?? []) {
      const service = String(attributesOf(rs.resource?.attributes)["service.name"] ?? "");
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          this.spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? "",
            name: s.name,
            kind: s.kind,
            attributes: attributesOf(s.attributes),
            status: s.status?.code ?? 0,
          });
    }
    for (const w of this.#waiters.splice(0)) w();
  }

  /** Waits (up to `timeoutMs`) until `done` holds over the spans received so far. */
  async until(done: (spans: ReceivedSpan[]) => boolean, timeoutMs = 60_000): Promise<ReceivedSpan[]> {
    const deadline = Date.now() + timeoutMs;
    while (!done(this.spans)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`OTLP receiver: condition not met in ${timeoutMs} ms; ${this.spans.length} spans`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.min(left, 1000));
        this.#waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
    return this.spans;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => (this.#server ? this.#server.close(() => r()) : r()));
  }
}
