import { describe, expect, it } from "vitest";
import { Timeline } from "../src/timeline";
import type { StreamEvent } from "../src/types";

let seq = 0;
const ev = (type: string, data: Record<string, unknown>): StreamEvent => ({ id: ++seq, type, data: { type, ...data } });

describe("Timeline", () => {
  it("streams text into one entry that the finished message replaces in place", () => {
    const t = new Timeline();
    t.apply(ev("session.input.consumed", { data: { item_id: "u1", type: "message", data: { role: "user", content: [{ type: "input_text", text: "hi" }] } } }));
    t.apply(ev("response.output_text.delta", { delta: "Hel", response_id: "r1" }));
    t.apply(ev("response.output_text.delta", { delta: "lo", response_id: "r1" }));
    expect(t.entries.map((e) => e.kind)).toEqual(["user", "assistant"]);
    expect(t.entries[1]).toMatchObject({ text: "Hello", streaming: true });
    t.apply(ev("response.output_item.done", { item: { id: "m1", type: "message", role: "assistant", response_id: "r1", content: [{ type: "output_text", text: "Hello" }] } }));
    expect(t.entries).toHaveLength(2);
    expect(t.entries[1]).toMatchObject({ key: "m1", text: "Hello", streaming: false });
    t.apply(ev("response.completed", { response: { id: "r1", usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } } }));
    expect(t.entries[2]).toMatchObject({ kind: "usage", usage: { total_tokens: 5 } });
  });

  it("tracks a client call from parked to answered, and an approval to denied", () => {
    const t = new Timeline();
    t.apply(ev("response.output_item.done", { item: { id: "i1", type: "function_call", status: "action_required", call_id: "c1", name: "Read", arguments: "{}" } }));
    expect(t.waiting().map((e) => e.callId)).toEqual(["c1"]);
    t.apply(ev("response.output_item.done", { item: { id: "o1", type: "function_call_output", call_id: "c1", output: "text" } }));
    expect(t.waiting()).toEqual([]);
    expect(t.get("call-c1")).toMatchObject({ status: "done", output: "text", name: "Read" });

    t.apply(ev("response.elicitation_request", { elicitation_id: "approve_c2", response_id: "r", params: { call_id: "c2", tool_name: "Echo", arguments: '{"x":1}' } }));
    expect(t.waiting()).toHaveLength(1);
    expect(t.get("call-c2")).toMatchObject({ status: "approval", elicitationId: "approve_c2" });
    t.apply(ev("response.elicitation_resolved", { elicitation_id: "approve_c2", action: "decline" }));
    expect(t.get("call-c2")).toMatchObject({ status: "denied" });
  });

  it("marks what still waits when the turn is interrupted, and shows failures", () => {
    const t = new Timeline();
    t.markWaiting([{ call_id: "c9", name: "Bash", arguments: "{}", response_id: "r", kind: "client", elicitation_id: null }]);
    expect(t.waiting()).toHaveLength(1);
    t.apply(ev("response.cancelled", { response: { id: "r" } }));
    expect(t.waiting()).toEqual([]);
    t.apply(ev("response.failed", { response: { id: "r2", error: { code: "max_iterations", message: "too many" } } }));
    expect(t.entries.at(-1)).toMatchObject({ kind: "error", code: "max_iterations" });
  });

  it("prepends older history without duplicating what is shown", () => {
    const t = new Timeline();
    const msg = (id: string, role: string, text: string) => ({ id, type: "message", role, content: [{ type: "text", text }] });
    t.addItems([msg("b", "user", "second"), msg("c", "assistant", "reply")]);
    t.prependItems([msg("a", "user", "first"), msg("b", "user", "second")]);
    expect(t.entries.map((e) => e.key)).toEqual(["a", "b", "c"]);
    expect(t.get("c")).toBe(t.entries[2]);
  });
});

describe("snapshot items", () => {
  it("reads the snapshot's nested `data` as /items' flat fields", () => {
    const t = new Timeline();
    t.addItems([
      { id: "u", type: "message", data: { role: "user", content: [{ type: "input_text", text: "q" }] } },
      { id: "f", type: "function_call", data: { call_id: "c", name: "Read", arguments: "{}" } },
      { id: "o", type: "function_call_output", data: { call_id: "c", output: "out" } },
    ] as never);
    expect(t.entries.map((e) => e.kind)).toEqual(["user", "tool"]);
    expect(t.get("call-c")).toMatchObject({ name: "Read", output: "out", status: "done" });
  });
});
