import { setFlagsFromString } from "node:v8";

/**
 * A full GC that evacuates every fragmented page of V8's old space, then a
 * second one, which lets V8 release the pages the first emptied (until then
 * they count in RSS: the first one's copies are made before its pages go).
 * A plain gc() (and each of the few GCs V8's memory reducer makes once a
 * process idles) evacuates pages only up to a budget (12 MB of live objects
 * a GC when reducing memory, 4 MB or what its measured compaction speed
 * allows in 0.5 ms a page otherwise: V8 11.3), so how much of a burst's
 * sparse old space an idle spell leaves varies with the burst's size and
 * from run to run; after this, what is left is the live heap on compacted
 * pages. `gc`: the --expose-gc one. The flag is on for that one GC only.
 * For the bench's service processes (host/child.ts, over their IPC), never a
 * service's own code path.
 */
export function compactingGc(gc: () => void): void {
  setFlagsFromString("--compact-on-every-full-gc");
  try {
    gc();
  } finally {
    setFlagsFromString("--no-compact-on-every-full-gc");
  }
  gc();
}
