import { describe, expect, it } from "vitest";
import { detailsText, type EntryOf, Timeline } from "../src/timeline";
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

describe("hosted calls", () => {
  it("keeps the workspace's last lifecycle event: pending, ready, a failure's reason, a restore", () => {
    const t = new Timeline();
    expect(t.environment).toBeNull();
    const before = t.version;
    t.apply(ev("session.environment", { status: "pending", response_id: "r1", restored: false, error: null }));
    expect(t.environment).toEqual({ status: "pending", restored: false, error: null });
    expect(t.version).toBeGreaterThan(before);
    t.apply(ev("session.environment", { status: "failed", response_id: "r1", restored: false, error: { code: "environment_setup_failed", message: "the environment's setup command `make deps` exited 2" } }));
    expect(t.environment).toEqual({ status: "failed", restored: false, error: "the environment's setup command `make deps` exited 2" });
    t.apply(ev("session.environment", { status: "suspended", response_id: null }));
    t.apply(ev("session.environment", { status: "ready", response_id: "r2", restored: true }));
    expect(t.environment).toEqual({ status: "ready", restored: true, error: null });
    expect(t.entries).toEqual([]); // the conversation itself is unchanged
  });

  const tool = (t: Timeline, id: string): EntryOf<"tool"> => {
    const entry = t.get(`call-${id}`);
    if (entry?.kind !== "tool") throw new Error(`no tool entry for ${id}`);
    return entry;
  };
  const call = (id: string, status: string, name = "Bash", args = '{"command": "ls"}') =>
    ev("response.output_item.done", { item: { id: `fc-${id}-${status}`, type: "function_call", status, call_id: id, name, arguments: args } });
  const delta = (id: string, text: string) => ev("response.function_call_output.delta", { call_id: id, delta: text });
  const output = (id: string, text: string, details: Record<string, unknown>) =>
    ev("response.output_item.done", { item: { id: `out-${id}`, type: "function_call_output", call_id: id, output: text, details } });

  it("accumulates a running command's output per call_id, then the output item replaces it", () => {
    const t = new Timeline();
    t.apply(call("b1", "in_progress"));
    t.apply(call("b2", "in_progress", "Bash", '{"command": "pwd"}'));
    expect(t.get("call-b1")).toMatchObject({ status: "running", runsOn: "server", live: "", output: null });
    t.apply(delta("b1", "line 1\n"));
    t.apply(delta("b2", "/workspace"));
    t.apply(delta("b1", "line 2\n"));
    expect(t.get("call-b1")).toMatchObject({ live: "line 1\nline 2\n", output: null, status: "running" });
    expect(t.get("call-b2")).toMatchObject({ live: "/workspace", output: null });
    // the call completes (its function_call item) before its output item: still running, still streaming
    t.apply(call("b1", "completed"));
    expect(t.get("call-b1")).toMatchObject({ status: "running", live: "line 1\nline 2\n", output: null });
    t.apply(output("b1", "line 1\nline 2\nline 3", { kind: "command", command: "ls", exit_code: 0, duration_ms: 12, timed_out: false }));
    expect(t.get("call-b1")).toMatchObject({ status: "done", output: "line 1\nline 2\nline 3", live: "", runsOn: "server" });
    expect(detailsText(tool(t, "b1").details)).toBe("exit 0 · 12 ms");
    // a late delta does not touch the final output
    t.apply(delta("b1", "stale"));
    expect(t.get("call-b1")).toMatchObject({ output: "line 1\nline 2\nline 3", live: "" });
    expect(t.get("call-b2")).toMatchObject({ live: "/workspace", status: "running" });
    expect(t.entries.filter((e) => e.kind === "tool")).toHaveLength(2);
  });

  it("never puts a server call in the waiting list: that is for client calls and approvals", () => {
    const t = new Timeline();
    t.apply(call("s1", "in_progress"));
    t.apply(delta("s1", "x"));
    expect(t.waiting()).toEqual([]);
    t.apply(call("c1", "action_required", "Read", "{}"));
    expect(t.waiting().map((e) => e.callId)).toEqual(["c1"]);
    expect(t.get("call-c1")).toMatchObject({ runsOn: "client", status: "waiting" });
  });

  it("reads details from history items (the snapshot's nested data) and marks them server calls", () => {
    const t = new Timeline();
    t.addItems([
      { id: "f", type: "function_call", status: "completed", data: { call_id: "w", name: "Write", arguments: "{}" } },
      { id: "o", type: "function_call_output", data: { call_id: "w", output: "Successfully wrote /workspace/notes.txt", details: { kind: "file", path: "/workspace/notes.txt" } } },
      { id: "f2", type: "function_call", status: "completed", data: { call_id: "b", name: "Bash", arguments: "{}" } },
      { id: "o2", type: "function_call_output", data: { call_id: "b", output: "boom", details: { kind: "command", exit_code: 2, duration_ms: 1519, timed_out: false, output_file_id: "file_1" } } },
    ] as never);
    const write = tool(t, "w");
    expect(write.runsOn).toBe("server");
    expect(detailsText(write.details)).toBe("/workspace/notes.txt");
    const bash = tool(t, "b");
    expect(detailsText(bash.details)).toBe("exit 2 · 1.5 s");
    expect(bash.details?.output_file_id).toBe("file_1");
  });

  it("says a command was stopped at its timeout, and shows nothing without details", () => {
    expect(detailsText({ kind: "command", exit_code: null, duration_ms: 120_000, timed_out: true })).toBe("timed out · 2 min 0 s");
    expect(detailsText({ kind: "command", exit_code: null, duration_ms: 5 })).toBe("killed · 5 ms");
    expect(detailsText(null)).toBe("");
    const t = new Timeline();
    t.apply(call("l", "in_progress", "smoke_echo", "{}"));
    t.apply(ev("response.output_item.done", { item: { id: "ol", type: "function_call_output", call_id: "l", output: "echo" } }));
    expect(t.get("call-l")).toMatchObject({ details: null, runsOn: "server", status: "done" });
  });

  it("shows deltas of a call it has not seen announced (a stream joined mid-command)", () => {
    const t = new Timeline();
    t.apply(delta("late", "part"));
    expect(t.get("call-late")).toMatchObject({ kind: "tool", live: "part", runsOn: "server", status: "running" });
    t.apply(call("late", "completed"));
    expect(t.get("call-late")).toMatchObject({ name: "Bash", live: "part", status: "running" });
  });
});
