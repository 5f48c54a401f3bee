// A Map's values taken in turn, a bounded number per call (the driver's memory sampler).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Turns } from "./turns.ts";

const all = () => true;

test("each call takes up to the limit, going on where the last stopped and wrapping round", () => {
  const items = new Map([1, 2, 3, 4, 5, 6, 7].map((n) => [n, n]));
  const turns = new Turns(items);
  assert.deepEqual(turns.take(3, all), [1, 2, 3]);
  assert.deepEqual(turns.take(3, all), [4, 5, 6]);
  assert.deepEqual(turns.take(3, all), [7, 1, 2]);
});

test("a limit above the size takes each value once a call", () => {
  const turns = new Turns(
    new Map([
      ["a", 1],
      ["b", 2],
    ]),
  );
  assert.deepEqual(turns.take(10, all), [1, 2]);
  assert.deepEqual(turns.take(10, all), [1, 2]);
  assert.deepEqual(new Turns(new Map()).take(10, all), []);
});

test("values not wanted are passed over without counting; a round without enough wanted ends the call", () => {
  const items = new Map([1, 2, 3, 4, 5, 6].map((n) => [n, n]));
  const turns = new Turns(items);
  const even = (n: number) => n % 2 === 0;
  assert.deepEqual(turns.take(2, even), [2, 4]);
  assert.deepEqual(turns.take(2, even), [6, 2]);
  assert.deepEqual(
    turns.take(5, (n) => n === 3),
    [3],
  );
});

test("entries added and deleted between calls are seen and skipped", () => {
  const items = new Map([1, 2, 3].map((n) => [n, n]));
  const turns = new Turns(items);
  assert.deepEqual(turns.take(1, all), [1]);
  items.delete(2);
  items.set(4, 4);
  assert.deepEqual(turns.take(3, all), [3, 4, 1]);
});
