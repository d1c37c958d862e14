// The conversation as the session view shows it: items (history) and stream events (live) folded
// into entries. Mutable on purpose: a 5,000-entry session is updated in place, one entry object
// replaced per change (so unchanged rows keep their identity), and `version` tells the view to
// re-render.

import type { EnvironmentState, Item, StreamEvent, ToolDetails, Usage, WaitingCall } from "./types";

export type { ToolDetails } from "./types";

export type ToolStatus = "running" | "waiting" | "approval" | "denied" | "done" | "cancelled";

/** Where a call runs: the server (hosted, Lambda, MCP tools), the client (answered by someone), or not known. */
export type ToolRunsOn = "server" | "client" | null;

/** What the live output of one call keeps while it streams (the server sends at most 64,000 characters). */
export const LIVE_OUTPUT_MAX_CHARS = 200_000;

export type Entry =
  | { kind: "user"; key: string; text: string }
  | { kind: "assistant"; key: string; text: string; streaming: boolean; responseId: string | null }
  | {
      kind: "tool";
      key: string;
      callId: string;
      name: string;
      arguments: string;
      output: string | null;
      /** A running hosted command's output so far (function_call_output deltas); "" once the output item is in. */
      live: string;
      details: ToolDetails | null;
      runsOn: ToolRunsOn;
      status: ToolStatus;
      elicitationId: string | null;
      responseId: string | null;
    }
  | { kind: "error"; key: string; code: string; message: string }
  | { kind: "notice"; key: string; text: string }
  | { kind: "usage"; key: string; responseId: string; usage: Usage };

export type EntryOf<K extends Entry["kind"]> = Extract<Entry, { kind: K }>;

const INTERRUPT_MARKER = "[System: interrupted]";
const CANCELLED_OUTPUT = "[Cancelled";

function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** One line about a finished server call: "exit 0 · 12 ms", "timed out · 2.0 s", or a file tool's path. */
export function detailsText(details: ToolDetails | null): string {
  if (!details) return "";
  const parts: string[] = [];
  if (details.kind === "command" || details.exit_code !== undefined) {
    if (details.timed_out) parts.push("timed out");
    else if (typeof details.exit_code === "number") parts.push(`exit ${details.exit_code}`);
    else if (details.exit_code === null) parts.push("killed");
  } else if (details.path) {
    parts.push(details.path);
  }
  if (typeof details.duration_ms === "number") parts.push(formatDuration(details.duration_ms));
  return parts.join(" · ");
}

export function itemText(content: Item["content"]): string {
  if (typeof content === "string") return content;
  return (content ?? []).map((block) => block.text ?? "").join("");
}

function str(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function obj(value: unknown): Record<string, unknown> {
  return value && typeof value === "object" ? (value as Record<string, unknown>) : {};
}

/** The snapshot nests an item's fields under `data`; `/items` and stream events spread them. */
export function flatten(item: Item & { data?: Record<string, unknown> }): Item {
  const { data, ...rest } = item;
  return data && typeof data === "object" ? ({ ...data, ...rest }) : item;
}

export class Timeline {
  entries: Entry[] = [];
  version = 0;
  status: string = "idle";
  /** The hosted workspace's last lifecycle event seen on the stream (null: none yet). */
  environment: EnvironmentState | null = null;
  private readonly index = new Map<string, number>();

  get(key: string): Entry | undefined {
    const at = this.index.get(key);
    return at === undefined ? undefined : this.entries[at];
  }

  /** The calls that wait on someone now, oldest first. */
  waiting(): EntryOf<"tool">[] {
    return this.entries.filter(
      (e): e is EntryOf<"tool"> => e.kind === "tool" && (e.status === "waiting" || e.status === "approval"),
    );
  }

  private put(entry: Entry): void {
    const at = this.index.get(entry.key);
    if (at === undefined) {
      this.index.set(entry.key, this.entries.length);
      this.entries.push(entry);
    } else {
      this.entries[at] = entry;
    }
    this.version += 1;
  }

  private rekey(oldKey: string, entry: Entry): void {
    const at = this.index.get(oldKey);
    if (at === undefined || this.index.has(entry.key)) {
      if (at !== undefined) this.remove(oldKey);
      this.put(entry);
      return;
    }
    this.index.delete(oldKey);
    this.index.set(entry.key, at);
    this.entries[at] = entry;
    this.version += 1;
  }

  private remove(key: string): void {
    const at = this.index.get(key);
    if (at === undefined) return;
    this.entries.splice(at, 1);
    this.reindex();
  }

  private reindex(): void {
    this.index.clear();
    this.entries.forEach((entry, i) => this.index.set(entry.key, i));
    this.version += 1;
  }

  private tool(callId: string): EntryOf<"tool"> {
    const found = this.get(`call-${callId}`);
    if (found?.kind === "tool") return found;
    return {
      kind: "tool",
      key: `call-${callId}`,
      callId,
      name: "",
      arguments: "",
      output: null,
      live: "",
      details: null,
      runsOn: null,
      status: "running",
      elicitationId: null,
      responseId: null,
    };
  }

  private itemEntry(item: Item): Entry | null {
    if (item.type === "message") {
      const text = itemText(item.content);
      if (item.role === "user" && text.startsWith(INTERRUPT_MARKER)) return { kind: "notice", key: item.id, text: "Turn interrupted" };
      if (item.role === "user") return { kind: "user", key: item.id, text };
      return { kind: "assistant", key: item.id, text, streaming: false, responseId: item.response_id ?? null };
    }
    return null;
  }

  /** Apply history items (oldest first) after what is there (the snapshot's newest items). */
  addItems(items: Item[]): void {
    for (const item of items) this.applyItem(flatten(item));
  }

  /** Older history (oldest first) before everything shown; items already present are skipped. */
  prependItems(items: Item[]): void {
    const fresh = new Timeline();
    fresh.addItems(items);
    const older = fresh.entries.filter((e) => {
      const mine = this.get(e.key);
      if (mine?.kind === "tool" && e.kind === "tool") {
        // the call was seen through its output first: complete it in place
        this.put({ ...mine, name: mine.name || e.name, arguments: mine.arguments || e.arguments });
        return false;
      }
      return mine === undefined;
    });
    if (older.length === 0) return;
    this.entries = [...older, ...this.entries];
    this.reindex();
  }

  private applyItem(item: Item): void {
    if (item.type === "function_call" && item.call_id) {
      const tool = this.tool(item.call_id);
      const status: ToolStatus = item.status === "action_required" ? "waiting" : tool.output !== null ? "done" : tool.status;
      // a client call is parked `action_required`; a server call is announced `in_progress` while it runs
      const runsOn: ToolRunsOn =
        item.status === "action_required" ? "client" : item.status === "in_progress" ? "server" : tool.runsOn;
      this.put({
        ...tool,
        runsOn,
        name: item.name ?? tool.name,
        arguments: item.arguments ?? tool.arguments,
        status,
        responseId: item.response_id ?? tool.responseId,
      });
      return;
    }
    if (item.type === "function_call_output" && item.call_id) {
      const tool = this.tool(item.call_id);
      const output = item.output ?? "";
      const details = item.details && typeof item.details === "object" ? item.details : null;
      this.put({
        ...tool,
        output,
        live: "", // the whole (capped) output replaces what streamed
        details,
        runsOn: details ? "server" : tool.runsOn,
        status: output.startsWith(CANCELLED_OUTPUT) ? "cancelled" : "done",
      });
      return;
    }
    const entry = this.itemEntry(item);
    if (!entry) return;
    if (entry.kind === "assistant" && entry.responseId) {
      const streaming = this.get(`stream-${entry.responseId}`);
      if (streaming) {
        this.rekey(streaming.key, entry);
        return;
      }
    }
    this.put(entry);
  }

  /** The snapshot's `waiting` list: which calls wait for an output or an approval. */
  markWaiting(calls: WaitingCall[]): void {
    for (const call of calls) {
      const tool = this.tool(call.call_id);
      this.put({
        ...tool,
        name: tool.name || call.name,
        arguments: tool.arguments || call.arguments,
        status: call.kind === "approval" ? "approval" : "waiting",
        runsOn: call.kind === "client" ? "client" : tool.runsOn,
        elicitationId: call.elicitation_id,
        responseId: call.response_id,
      });
    }
  }

  apply(event: StreamEvent): void {
    const data = event.data;
    switch (event.type) {
      case "session.status":
        this.status = str(data.status) || this.status;
        this.version += 1;
        return;
      case "session.environment": {
        const error = obj(data.error);
        this.environment = {
          status: str(data.status),
          restored: data.restored === true,
          error: str(error.message) || str(error.code) || null,
        };
        this.version += 1;
        return;
      }
      case "session.input.consumed": {
        const consumed = obj(data.data);
        const inner = obj(consumed.data);
        const id = str(consumed.item_id);
        if (id && !this.get(id)) this.applyItem({ id, type: str(consumed.type) || "message", ...inner });
        return;
      }
      case "response.output_text.delta": {
        const rid = str(data.response_id);
        const key = `stream-${rid}`;
        const current = this.get(key);
        const text = (current?.kind === "assistant" ? current.text : "") + str(data.delta);
        this.put({ kind: "assistant", key, text, streaming: true, responseId: rid });
        return;
      }
      case "response.function_call_output.delta": {
        // a hosted command's output while it runs: shown until its function_call_output item replaces it
        const callId = str(data.call_id);
        if (!callId) return;
        const tool = this.tool(callId);
        if (tool.output !== null) return; // the final output is in: a late delta changes nothing
        const live = (tool.live + str(data.delta)).slice(-LIVE_OUTPUT_MAX_CHARS);
        this.put({ ...tool, live, runsOn: "server" });
        return;
      }
      case "response.retry": {
        const key = `stream-${str(data.response_id)}`;
        if (this.get(key)) this.remove(key);
        return;
      }
      case "response.output_item.done": {
        const item = obj(data.item) as unknown as Item;
        if (item.id || item.call_id) this.applyItem(item);
        return;
      }
      case "response.elicitation_request": {
        const params = obj(data.params);
        const tool = this.tool(str(params.call_id));
        this.put({
          ...tool,
          name: tool.name || str(params.tool_name),
          arguments: tool.arguments || str(params.arguments),
          status: "approval",
          elicitationId: str(data.elicitation_id),
          responseId: str(data.response_id) || tool.responseId,
        });
        return;
      }
      case "response.elicitation_resolved": {
        const callId = str(data.elicitation_id).replace(/^approve_/, "");
        const tool = this.tool(callId);
        if (tool.status === "approval") this.put({ ...tool, status: str(data.action) === "accept" ? "running" : "denied" });
        return;
      }
      case "response.completed": {
        const response = obj(data.response);
        const rid = str(response.id);
        this.finishStreaming(rid);
        const usage = obj(response.usage) as unknown as Usage;
        if (rid && typeof usage.total_tokens === "number") this.put({ kind: "usage", key: `usage-${rid}`, responseId: rid, usage });
        return;
      }
      case "response.failed": {
        const response = obj(data.response);
        const error = obj(response.error);
        this.finishStreaming(str(response.id));
        this.put({
          kind: "error",
          key: `error-${str(response.id) || String(event.id)}`,
          code: str(error.code) || "failed",
          message: str(error.message) || "The turn failed.",
        });
        return;
      }
      case "response.cancelled": {
        const response = obj(data.response);
        this.finishStreaming(str(response.id));
        for (const tool of this.waiting()) this.put({ ...tool, status: "cancelled" });
        return;
      }
      default:
        return;
    }
  }

  private finishStreaming(rid: string): void {
    const current = this.get(`stream-${rid}`);
    if (current?.kind === "assistant" && current.streaming) this.put({ ...current, streaming: false });
  }
}
