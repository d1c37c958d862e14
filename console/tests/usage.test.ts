import { describe, expect, it } from "vitest";
import { cost, formatCost, mergePrices, priceFor } from "../src/usage";

describe("prices", () => {
  it("picks the longest matching key, so a mini model is not priced as its big sibling", () => {
    expect(priceFor("gpt-4.1-mini")).toEqual({ input: 0.4, output: 1.6 });
    expect(priceFor("gpt-4.1")).toEqual({ input: 2, output: 8 });
    expect(priceFor("us.anthropic.claude-3-5-haiku-20241022-v1:0")).toEqual({ input: 0.8, output: 4 });
    expect(priceFor("skyloop-offline")).toBeNull();
  });

  it("costs tokens per million, and overrides merge over the defaults", () => {
    expect(cost({ input_tokens: 1_000_000, output_tokens: 500_000 }, { input: 0.4, output: 1.6 })).toBeCloseTo(1.2);
    expect(cost({ input_tokens: 1, output_tokens: 1 }, null)).toBeNull();
    const prices = mergePrices({ "skyloop-offline": { input: 1, output: 2 }, broken: { input: "x" } });
    expect(priceFor("skyloop-offline", prices)).toEqual({ input: 1, output: 2 });
    expect(prices.broken).toBeUndefined();
    expect(formatCost(1.2)).toBe("$1.20");
    expect(formatCost(0.00123)).toBe("$0.0012");
    expect(formatCost(null)).toBe("—");
  });
});
