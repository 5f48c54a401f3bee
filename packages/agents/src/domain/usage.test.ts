import assert from "node:assert/strict";
import { test } from "node:test";
import { PlatformError } from "@platform/errors";
import { budgetReached, EMPTY_USAGE, effectiveBudgets, mergeBudgets, validateBudgets } from "./usage.ts";

test("budgets: validated as whole numbers up to 2^53-1, merged with 0 removing, the session's over the agent's", () => {
  assert.deepEqual(validateBudgets({ maxTokens: 10n, maxCpuSeconds: 0 }), { maxTokens: 10, maxCpuSeconds: 0 });
  for (const bad of [-1, 1.5, 2 ** 53, BigInt(2 ** 53)])
    assert.throws(
      () => validateBudgets({ maxToolCalls: bad }),
      (err: unknown) => {
        assert.ok(err instanceof PlatformError);
        assert.match(err.message, /budgets.maxToolCalls must be a whole number/);
        return true;
      },
    );
  assert.deepEqual(mergeBudgets({ maxTokens: 5, maxToolCalls: 2 }, { maxTokens: 0, maxCpuSeconds: 3 }), {
    maxToolCalls: 2,
    maxCpuSeconds: 3,
  });
  assert.deepEqual(effectiveBudgets({ maxTokens: 100, maxToolCalls: 9 }, { maxTokens: 50 }), {
    maxTokens: 50,
    maxToolCalls: 9,
  });
});

test("budgetReached: used ≥ limit, tokens are input plus output, CPU in seconds", () => {
  const used = { ...EMPTY_USAGE, inputTokens: 15, outputTokens: 5, toolCalls: 2, cpuMs: 999 };
  assert.equal(budgetReached({}, used), undefined);
  assert.deepEqual(budgetReached({ maxTokens: 20 }, used), { budget: "tokens", limit: 20, used: 20 });
  assert.equal(budgetReached({ maxTokens: 21, maxToolCalls: 3, maxCpuSeconds: 1 }, used), undefined);
  assert.deepEqual(budgetReached({ maxToolCalls: 2 }, used), { budget: "tool_calls", limit: 2, used: 2 });
  assert.deepEqual(budgetReached({ maxCpuSeconds: 1 }, { ...used, cpuMs: 1000 }), {
    budget: "cpu_seconds",
    limit: 1,
    used: 1,
  });
});
