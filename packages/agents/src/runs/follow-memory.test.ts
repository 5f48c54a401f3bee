import assert from "node:assert/strict";
import { test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { Session, SessionEvent } from "../domain/model.ts";
import type { Store } from "../domain/store.ts";
import { Followers } from "./follow.ts";
import { EventHub } from "./hub.ts";

// What an idle follower keeps while it waits: an SSE follower of a run that
// goes on for hours is suspended in Followers.follow the whole time, and
// thousands of them share one process (bench sse-streams). The log pages it
// read and the events it relayed are of no use to it any more.

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const ORG = "org";
const SESSION = "session";
const RUN = "run";

test("an idle follower holds neither the log it read nor the last event it relayed", async () => {
  const made: WeakRef<object>[] = [];
  const track = <T extends object>(o: T): T => {
    made.push(new WeakRef(o));
    return o;
  };
  const event = (seq: number, type: SessionEvent["type"]): SessionEvent =>
    track({
      seq,
      type,
      content: `e${seq}`,
      tokensIn: 0,
      tokensOut: 0,
      toolUseId: "",
      isError: false,
      createdAt: new Date(0),
      runId: RUN,
    });
  const store = {
    async readLog(_org: string, _session: string, after: number) {
      const session: Session = track({
        id: SESSION,
        orgId: ORG,
        agentId: "a",
        status: "running",
        activeRunId: RUN,
        lastSeq: 2,
        createdAt: new Date(0),
        updatedAt: new Date(0),
      });
      return track({ session, events: track([event(1, "user"), event(2, "text")].filter((e) => e.seq > after)) });
    },
  } as unknown as Store;
  const hub = new EventHub();
  const detach = hub.attachWriter(SESSION);
  // Reads and publishes go through helpers: what the test itself handled must not stay in its own frame.
  const publish = (seq: number, type: SessionEvent["type"]) => hub.publish(SESSION, [event(seq, type)]);
  const it = new Followers(store, hub, 1_000).follow(ORG, SESSION, 0)[Symbol.asyncIterator]();
  assert.deepEqual(await seqs(it, 2), [1, 2]);
  publish(3, "text");
  assert.deepEqual(await seqs(it, 1), [3]);
  // Now it waits for the run's next event.
  const waiting = it.next();
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setImmediate(r));
    gc();
  }
  const kept = made.filter((r) => r.deref() !== undefined).length;
  assert.equal(kept, 0, `the waiting follower still holds ${kept} of the ${made.length} objects it read or relayed`);
  publish(4, "done");
  assert.equal((await waiting).value?.seq, 4);
  assert.equal((await it.next()).done, true);
  detach();
});

async function seqs(it: AsyncIterator<SessionEvent>, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await it.next()).value!.seq);
  return out;
}
