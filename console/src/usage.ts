// Cost of a turn: the server prices tokens (skyloop.pricing: the agent's executor.pricing, then
// SKYLOOP_MODEL_PRICES, then its table of public list prices) and reports the price per million
// tokens with the session's usage; a model without a price shows tokens only.

import type { Usage } from "./types";

export interface Price {
  input: number;
  output: number;
}

export function cost(usage: Pick<Usage, "input_tokens" | "output_tokens">, price: Price | null): number | null {
  if (!price) return null;
  return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000;
}

export function formatCost(value: number | null | undefined): string {
  if (value === null || value === undefined) return "—";
  if (value === 0) return "$0";
  if (value < 0.0001) return "<$0.0001";
  return `$${value.toFixed(value < 0.01 ? 4 : 2)}`;
}

export function formatTokens(n: number): string {
  return n >= 10_000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}
