// Cost of a turn: tokens × a price per model. Prices are USD per 1M tokens, public list prices
// (on-demand, standard tier) at the time of writing; a model missing here shows tokens only.
// Override or extend without a rebuild: put {"model-substring": {"input": 1.0, "output": 2.0}} in
// prices.json next to index.html (console/public/prices.json; in the cloud, the console bucket).

import type { Usage } from "./types";

export interface Price {
  input: number;
  output: number;
}

export const DEFAULT_PRICES: Record<string, Price> = {
  "gpt-4.1-nano": { input: 0.1, output: 0.4 },
  "gpt-4.1-mini": { input: 0.4, output: 1.6 },
  "gpt-4.1": { input: 2.0, output: 8.0 },
  "gpt-4o-mini": { input: 0.15, output: 0.6 },
  "gpt-4o": { input: 2.5, output: 10.0 },
  "o4-mini": { input: 1.1, output: 4.4 },
  "claude-3-5-haiku": { input: 0.8, output: 4.0 },
  "claude-3-5-sonnet": { input: 3.0, output: 15.0 },
  "claude-3-7-sonnet": { input: 3.0, output: 15.0 },
  "claude-sonnet-4": { input: 3.0, output: 15.0 },
};

/** The price of `model`: the longest key of the table the model id contains (Bedrock ids carry prefixes). */
export function priceFor(model: string | null | undefined, prices: Record<string, Price> = DEFAULT_PRICES): Price | null {
  if (!model) return null;
  const id = model.toLowerCase();
  let best: [string, Price] | null = null;
  for (const [key, price] of Object.entries(prices)) {
    if (id.includes(key.toLowerCase()) && (!best || key.length > best[0].length)) best = [key, price];
  }
  return best ? best[1] : null;
}

export function cost(usage: Pick<Usage, "input_tokens" | "output_tokens">, price: Price | null): number | null {
  if (!price) return null;
  return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000;
}

export function formatCost(value: number | null): string {
  if (value === null) return "—";
  if (value === 0) return "$0";
  if (value < 0.0001) return "<$0.0001";
  return `$${value.toFixed(value < 0.01 ? 4 : 2)}`;
}

export function formatTokens(n: number): string {
  return n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

export function mergePrices(overrides: unknown): Record<string, Price> {
  const merged = { ...DEFAULT_PRICES };
  if (overrides && typeof overrides === "object") {
    for (const [key, value] of Object.entries(overrides as Record<string, unknown>)) {
      const price = value as Partial<Price> | null;
      if (price && typeof price.input === "number" && typeof price.output === "number") {
        merged[key] = { input: price.input, output: price.output };
      }
    }
  }
  return merged;
}
