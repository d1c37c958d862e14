import { describe, expect, it } from "vitest";
import { cost, formatCost, formatTokens } from "../src/usage";

describe("cost", () => {
  it("prices tokens per million, and shows none without a price", () => {
    expect(cost({ input_tokens: 1_000_000, output_tokens: 500_000 }, { input: 0.4, output: 1.6 })).toBeCloseTo(1.2);
    expect(cost({ input_tokens: 1, output_tokens: 1 }, null)).toBeNull();
    expect(formatCost(1.2)).toBe("$1.20");
    expect(formatCost(0.00123)).toBe("$0.0012");
    expect(formatCost(0.00001)).toBe("<$0.0001");
    expect(formatCost(null)).toBe("—");
    expect(formatTokens(12_345)).toBe("12.3k");
  });
});
