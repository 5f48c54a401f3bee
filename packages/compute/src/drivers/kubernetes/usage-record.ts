// The RUN wrapper ends with one usage record on stderr:
//   NUL "PLATFORM_EXEC_USAGE_" <exec id> " " <peak kB> " " <oom_kill before> " "
//   <oom_kill after> " " <children user time> " " <children system time> NUL
// This filter passes everything else through unchanged and as it arrives: it
// only holds back bytes from a NUL on that could still be the record's start.
import { type Usage, zeroUsage } from "../../driver.ts";
import { USAGE_TAG } from "./scripts.ts";

export type ExecUsage = Usage & { oomKills: number };

/** Parses the record's fields (after the tag and id). */
export function parseUsageRecord(fields: string): ExecUsage {
  const [mem, before, after, user, sys] = fields.trim().split(/\s+/);
  const secs = (s: string | undefined) => {
    const m = /^(\d+)m([\d.]+)s$/.exec(s ?? "");
    return m ? Number(m[1]) * 60 + Number(m[2]) : 0;
  };
  const kb = Number(mem) || 0;
  const b = Number(before);
  const a = Number(after);
  return {
    ...zeroUsage(),
    cpuMs: Math.round((secs(user) + secs(sys)) * 1000),
    memoryPeakBytes: kb * 1024,
    memoryAvgBytes: kb * 1024,
    oomKills: Number.isFinite(a) && Number.isFinite(b) && a > b ? a - b : 0,
  };
}

export class UsageRecordFilter {
  private readonly start: Buffer;
  private pending = Buffer.alloc(0);
  record: ExecUsage | undefined;

  constructor(execId: string) {
    this.start = Buffer.from(`\0${USAGE_TAG}${execId} `);
  }

  /** Bytes of this chunk to pass on now. */
  push(chunk: Uint8Array): Buffer {
    let buf = Buffer.concat([this.pending, chunk]);
    this.pending = Buffer.alloc(0);
    if (!this.record) {
      const at = buf.indexOf(this.start);
      if (at >= 0) {
        const end = buf.indexOf(0, at + this.start.length);
        if (end < 0) {
          this.pending = buf.subarray(at);
          return buf.subarray(0, at);
        }
        this.record = parseUsageRecord(buf.subarray(at + this.start.length, end).toString("utf8"));
        buf = Buffer.concat([buf.subarray(0, at), buf.subarray(end + 1)]);
      } else {
        // Hold back a tail that is a proper prefix of the record's start.
        const nul = buf.lastIndexOf(0);
        if (
          nul >= 0 &&
          buf.length - nul < this.start.length &&
          this.start.subarray(0, buf.length - nul).equals(buf.subarray(nul))
        ) {
          this.pending = buf.subarray(nul);
          return buf.subarray(0, nul);
        }
      }
    }
    return buf;
  }

  /** What is still held back when the stream ends (it was not a record after all). */
  flush(): Buffer {
    const rest = this.pending;
    this.pending = Buffer.alloc(0);
    return rest;
  }
}
