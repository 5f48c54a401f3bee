import assert from "node:assert/strict";
import { test } from "node:test";
import { PlatformError } from "@platform/errors";
import {
  bool,
  ConfigError,
  custom,
  duration,
  host,
  int,
  list,
  logLevel,
  oneOf,
  port,
  readmeSettings,
  readSettings,
  replaced,
  SETTINGS_END,
  settingsBegin,
  settingsTable,
  text,
  url,
} from "./index.ts";

function refused(read: () => unknown, setting: string, message?: RegExp): void {
  assert.throws(read, (e: unknown) => {
    assert.ok(e instanceof ConfigError && e instanceof PlatformError, String(e));
    assert.equal(e.setting, setting);
    assert.ok(e.message.startsWith(setting), e.message);
    if (message) assert.match(e.message, message);
    return true;
  });
}

test("every kind reads its default when unset or blank, and the value when set", () => {
  const fields = {
    name: text("NAME", { default: "x", doc: "" }),
    opt: text("OPT", { doc: "" }),
    n: int("N", { default: 5, min: 1, max: 10, doc: "" }),
    p: port("P", { default: 8080, doc: "" }),
    d: duration("D", { default: 30_000, doc: "" }),
    b: bool("B", { default: true, doc: "" }),
    e: oneOf("E", ["a", "b"], { default: "a", doc: "" }),
    u: url("U", { protocols: ["http:", "https:"], doc: "" }),
    l: list("L", { doc: "" }),
    h: host(),
    level: logLevel(),
  };
  assert.deepEqual(readSettings(fields, { N: " ", OPT: "" }), {
    name: "x",
    opt: undefined,
    n: 5,
    p: 8080,
    d: 30_000,
    b: true,
    e: "a",
    u: undefined,
    l: [],
    h: "127.0.0.1",
    level: "info",
  });
  assert.deepEqual(
    readSettings(fields, {
      NAME: " y ",
      OPT: "o",
      N: "10",
      P: "0",
      D: "1h30m",
      B: "OFF",
      E: "b",
      U: "https://x",
      L: "a, b,,c",
      HOST: "0.0.0.0",
      LOG_LEVEL: "debug",
    }),
    {
      name: "y",
      opt: "o",
      n: 10,
      p: 0,
      d: 5_400_000,
      b: false,
      e: "b",
      u: "https://x",
      l: ["a", "b", "c"],
      h: "0.0.0.0",
      level: "debug",
    },
  );
});

test("a bad or missing value throws the one ConfigError naming the variable", () => {
  refused(() => text("R", { required: true, doc: "" }).read({}), "R", /R is required/);
  refused(() => int("N", { default: 1, min: 1, max: 9, doc: "" }).read({ N: "10" }), "N", /from 1 to 9, got "10"/);
  refused(() => int("N", { default: 1, min: 1, doc: "" }).read({ N: "1.5" }), "N", /at least 1/);
  refused(() => port("P", { default: 1, min: 1, doc: "" }).read({ P: "0" }), "P", /port number \(1-65535\)/);
  refused(() => port("P", { default: 1, doc: "" }).read({ P: "70000" }), "P");
  refused(() => duration("D", { default: 1, doc: "" }).read({ D: "1y" }), "D", /duration such as 30s/);
  refused(() => duration("D", { default: 1, minMs: 1000, doc: "" }).read({ D: "5ms" }), "D", /at least 1000 ms/);
  refused(() => bool("B", { default: true, doc: "" }).read({ B: "maybe" }), "B");
  refused(() => oneOf("E", ["a", "b"], { default: "a", doc: "" }).read({ E: "c" }), "E", /one of a, b/);
  refused(() => url("U", { protocols: ["https:"], doc: "" }).read({ U: "http://x" }), "U", /https:\/\/ URL/);
  refused(() => url("U", { required: true, doc: "" }).read({}), "U", /is required/);
  refused(() => logLevel(["info", "warn"]).read({ LOG_LEVEL: "trace" }), "LOG_LEVEL");
  refused(() => replaced("OLD_HOST", "HOST", "why").read({ OLD_HOST: "x" }), "OLD_HOST", /replaced by HOST/);
});

test("a secret URL is never echoed", () => {
  const secret = "postgres//user:hunter2@h/db";
  try {
    url("DATABASE_URL", { protocols: ["postgres:"], secret: true, doc: "" }).read({ DATABASE_URL: secret });
    assert.fail("accepted");
  } catch (e) {
    assert.ok(e instanceof ConfigError && !e.message.includes("hunter2"), String(e));
  }
});

test("words stand for numbers: off means 0 or no value", () => {
  assert.equal(int("N", { default: 5, min: 0, words: { off: 0 }, doc: "" }).read({ N: "off" }), 0);
  const interval = duration("I", { default: 1000, words: { off: undefined }, doc: "" });
  assert.equal(interval.read({ I: "off" }), undefined);
  assert.equal(interval.read({ I: "2s" }), 2000);
});

test("the listing has one row per visible field, and a README's table is found between its markers", () => {
  const fields = {
    a: port("A_PORT", { default: 1, doc: "the port | with a bar" }),
    tls: custom(["X", "Y"], { shown: "required", doc: "files", read: () => 0 }),
    old: replaced("OLD", "A_PORT", "why"),
    d: duration("D", { default: 3_600_000, doc: "" }),
  };
  const table = settingsTable(fields);
  assert.equal(
    table,
    [
      "| Variable | Default | |",
      "|---|---|---|",
      "| `A_PORT` | 1 | the port \\| with a bar |",
      "| `X`, `Y` | required | files |",
      "| `D` | 1h |  |",
    ].join("\n"),
  );
  assert.equal(readmeSettings(`# x\n${settingsBegin()}\n${table}\n${SETTINGS_END}\nmore`), table);
  const two = `${settingsBegin("a")}\nA\n${SETTINGS_END}\n${settingsBegin("b")}\nB\n${SETTINGS_END}`;
  assert.equal(readmeSettings(two, "b"), "B");
  assert.equal(readmeSettings("# no markers"), undefined);
});
