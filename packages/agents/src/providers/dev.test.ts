import assert from "node:assert/strict";
import { test } from "node:test";
import { baseRequest, modelProviderContract } from "./contract.ts";
import { DevModel } from "./dev.ts";
import type { ModelEvent } from "./provider.ts";

modelProviderContract("dev", async (scenario) => {
  const provider = new DevModel();
  switch (scenario) {
    case "text":
      return { provider, request: baseRequest("hello world"), expectedText: "echo: hello world" };
    case "tool":
      return { provider, request: baseRequest("run: ls -la") };
    case "midStreamError":
      return { provider, request: baseRequest("/fail some words first") };
    case "abort":
      return {
        provider,
        request: baseRequest("a fairly long message that the dev model streams back in several fragments of text"),
      };
    case "unreachable":
      return { skip: "the dev model runs in-process and is always reachable" };
    case "clientTool":
    case "mcpTool":
      return { skip: "the dev model calls only the built-in tools" };
  }
});

async function drain(content: string) {
  const request = baseRequest(content);
  const out: ModelEvent[] = [];
  for await (const e of await new DevModel().start(request, new AbortController().signal)) out.push(e);
  return out;
}

test("dev: /bash, /read, /write and /ls map to the four tools", async () => {
  const call = async (text: string) =>
    (await drain(text)).find((e) => e.type === "tool_use") as Extract<ModelEvent, { type: "tool_use" }>;
  assert.deepEqual((await call("/bash echo hi")).call.input, { command: "echo hi" });
  assert.equal((await call("/read a.txt")).call.name, "read_file");
  assert.deepEqual((await call("/write a.txt some text")).call.input, { path: "a.txt", content: "some text" });
  assert.deepEqual((await call("/ls")).call, { id: "toolu_dev_1", name: "list_files", input: { path: "." } });
});

test("dev: summarizes a tool result with its exit code and output", async () => {
  const request = baseRequest("x");
  request.messages = [
    { role: "user", content: "run: echo hi" },
    { role: "assistant", content: "", toolCalls: [{ id: "t", name: "bash", input: { command: "echo hi" } }] },
    { role: "tool", toolUseId: "t", content: '{"exitCode":2,"stdout":"hi\\n"}', isError: false },
  ];
  let text = "";
  for await (const e of await new DevModel().start(request, new AbortController().signal))
    if (e.type === "text") text += e.text;
  assert.equal(text, "The command exited with code 2.\nOutput:\nhi\n");
});

test("dev: deterministic, with word-count tokens", async () => {
  const a = await drain("one two three");
  const b = await drain("one two three");
  assert.deepEqual(a, b);
  assert.deepEqual(a.at(-2), { type: "usage", inputTokens: 3, outputTokens: 4 });
});

test("dev: tokens are the words \\s separates, every kind of whitespace included", async () => {
  // Each character \s matches (and some it does not), between and around words, in runs.
  const spaces = [..."\t\n\v\f\r \u00a0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"];
  const others = [..."a\u200b\u180eZ\u00ad\ud83d\ude00-"];
  let seed = 7;
  const pick = <T>(xs: T[]): T => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return xs[seed % xs.length]!;
  };
  for (let i = 0; i < 200; i++) {
    let text = "";
    for (let j = 0; j < 1 + (i % 40); j++) text += pick([pick(spaces), pick(others), pick(others)]);
    const request = baseRequest("x");
    request.messages = [{ role: "user", content: text }];
    let usage: ModelEvent | undefined;
    for await (const e of await new DevModel().start(request, new AbortController().signal))
      if (e.type === "usage") usage ??= e;
    assert.deepEqual(
      usage,
      { type: "usage", inputTokens: text.split(/\s+/).filter(Boolean).length, outputTokens: 0 },
      JSON.stringify(text),
    );
  }
});
