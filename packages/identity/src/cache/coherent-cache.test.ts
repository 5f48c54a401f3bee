import assert from "node:assert/strict";
import { test } from "node:test";
import { CoherentCache } from "./coherent-cache.ts";

const gate = { enabled: true };
const load = (value: string) => () => Promise.resolve(value);

async function filled(max: number, keys: string[]): Promise<CoherentCache<string, string>> {
  const cache = new CoherentCache<string, string>(gate, max);
  for (const k of keys) await cache.through(k, load(k));
  return cache;
}

/** Which of `keys` the cache holds (get moves entries, never drops one that is there and fresh). */
const held = (cache: CoherentCache<string, string>, keys: string[]) => keys.filter((k) => cache.get(k) !== undefined);

test("a hit on an entry of the older half moves it to the recent end: the least recently used goes first", async () => {
  const cache = await filled(4, ["a", "b", "c", "d"]);
  assert.equal(cache.get("a"), "a"); // 3 went in after it: more than half of 4
  await cache.through("e", load("e"));
  assert.equal(cache.size, 4);
  assert.deepEqual(held(cache, ["a", "b", "c", "d", "e"]), ["a", "c", "d", "e"]);
});

test("a hit on an entry of the newer half leaves it where it is (no delete and re-insert per hit)", async () => {
  const cache = await filled(4, ["a", "b", "c", "d"]);
  assert.equal(cache.get("d"), "d");
  assert.equal(cache.get("c"), "c"); // 1 went in after it: not more than half of 4
  for (const k of ["e", "f", "g"]) await cache.through(k, load(k));
  // Neither hit moved its entry, so c, the older, went before d (strict LRU would have kept c, the
  // last used, and dropped d); a and b went first either way.
  assert.deepEqual(held(cache, ["a", "b", "c", "d", "e", "f", "g"]), ["d", "e", "f", "g"]);
});

test("entries older than maxAgeMs are not returned and invalidation drops them", async () => {
  const cache = new CoherentCache<string, string>(gate, 10, 0);
  await cache.through("a", load("a"));
  await new Promise((r) => setTimeout(r, 2));
  assert.equal(cache.get("a"), undefined);
  assert.equal(cache.size, 0);
  const fresh = await filled(10, ["b"]);
  fresh.invalidate("b");
  assert.equal(fresh.get("b"), undefined);
});
