/** One connection attempt of a sandbox through its egress proxy (compute.v1.NetworkEvent). */
export interface NetworkEventRecord {
  sandboxId: string;
  /** Ascending per sandbox, from 1. */
  seq: number;
  at: Date;
  host: string;
  port: number;
  /** "" when the name did not resolve. */
  address: string;
  allowed: boolean;
  /** "" when allowed. */
  reason: string;
  protocol: "http" | "connect" | "socks5";
  egressBytes: number;
  ingressBytes: number;
  durationMs: number;
}

/** Persistence of the sandboxes' network events; the domain reads, the egress proxy appends. */
export interface NetworkEventStore {
  append(event: NetworkEventRecord): Promise<void>;
  /** Events with seq > afterSeq, oldest first, at most limit. */
  list(sandboxId: string, afterSeq: number, limit: number): Promise<NetworkEventRecord[]>;
  /** The highest seq and the byte totals of a sandbox's events (to continue after a restart). */
  totals(sandboxId: string): Promise<{ lastSeq: number; egressBytes: number; ingressBytes: number }>;
}

export class MemoryNetworkEventStore implements NetworkEventStore {
  private readonly rows = new Map<string, NetworkEventRecord[]>();
  async append(event: NetworkEventRecord): Promise<void> {
    const list = this.rows.get(event.sandboxId) ?? [];
    list.push({ ...event });
    this.rows.set(event.sandboxId, list);
  }
  async list(sandboxId: string, afterSeq: number, limit: number): Promise<NetworkEventRecord[]> {
    return (this.rows.get(sandboxId) ?? [])
      .filter((e) => e.seq > afterSeq)
      .sort((a, b) => a.seq - b.seq)
      .slice(0, limit)
      .map((e) => ({ ...e }));
  }
  async totals(sandboxId: string): Promise<{ lastSeq: number; egressBytes: number; ingressBytes: number }> {
    const list = this.rows.get(sandboxId) ?? [];
    return {
      lastSeq: list.reduce((m, e) => Math.max(m, e.seq), 0),
      egressBytes: list.reduce((s, e) => s + e.egressBytes, 0),
      ingressBytes: list.reduce((s, e) => s + e.ingressBytes, 0),
    };
  }
}
