import type { TurnUsage } from "../types";
import { formatTokens } from "../usage";

const WIDTH = 280;
const HEIGHT = 90;
const MAX_BARS = 40;

/** Tokens per turn, input under output, the newest turns; the figures are in the table beside it. */
export function UsageChart(props: { turns: TurnUsage[] }) {
  const turns = props.turns.slice(-MAX_BARS);
  if (turns.length === 0) return <p class="hint">No turns yet.</p>;
  const max = Math.max(1, ...turns.map((t) => t.total_tokens));
  const bar = WIDTH / turns.length;
  const total = turns.reduce((sum, t) => sum + t.total_tokens, 0);
  return (
    <svg
      class="chart"
      viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      role="img"
      aria-label={`Tokens per turn for the last ${turns.length} turns, ${formatTokens(total)} in all; the table lists each turn`}
    >
      {turns.map((t, i) => {
        const inH = (t.input_tokens / max) * (HEIGHT - 4);
        const outH = (t.output_tokens / max) * (HEIGHT - 4);
        const x = i * bar + 1;
        const w = Math.max(1, bar - 2);
        return (
          <g key={t.response_id}>
            <rect class="in" x={x} y={HEIGHT - inH} width={w} height={inH} />
            <rect class="out" x={x} y={HEIGHT - inH - outH} width={w} height={outH} />
          </g>
        );
      })}
    </svg>
  );
}
