// A session's live stream that survives dropped connections: it reconnects with the last id it
// delivered (Last-Event-ID), so the server replays exactly what followed, and it drops any event
// whose id it already delivered. The transport is pluggable: SSE over fetch now; a WebSocket live
// channel (GET /v1/info `live.url`) can implement `Transport` later without touching the views.

import { authHeaders } from "./api";
import { SseParser } from "./sse";
import type { StreamEvent } from "./types";

export type ConnectionState = "connecting" | "live" | "reconnecting" | "closed";

/** One connection: deliver events after `after` until the connection ends (resolve) or fails (reject). */
export interface Transport {
  connect(sessionId: string, after: number, signal: AbortSignal, onEvent: (event: StreamEvent) => void): Promise<void>;
}

export class SseTransport implements Transport {
  async connect(
    sessionId: string,
    after: number,
    signal: AbortSignal,
    onEvent: (event: StreamEvent) => void,
  ): Promise<void> {
    const response = await fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/stream`, {
      headers: { ...authHeaders(), Accept: "text/event-stream", "Last-Event-ID": String(after) },
      signal,
      cache: "no-store",
    });
    if (!response.ok || !response.body) throw new StreamError(response.status);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SseParser();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      for (const frame of parser.push(value)) {
        let data: Record<string, unknown>;
        try {
          data = JSON.parse(frame.data) as Record<string, unknown>;
        } catch {
          continue;
        }
        const id = frame.id !== null && /^\d+$/.test(frame.id) ? Number(frame.id) : null;
        onEvent({ id, type: typeof data.type === "string" ? data.type : frame.event, data });
      }
    }
  }
}

export class StreamError extends Error {
  constructor(readonly status: number) {
    super(`stream answered ${status}`);
  }
}

export interface StreamOptions {
  sessionId: string;
  after: number;
  onEvent: (event: StreamEvent) => void;
  onState?: (state: ConnectionState, reconnects: number) => void;
  transport?: Transport;
  /** Backoff between reconnects, doubling from `minDelayMs` up to `maxDelayMs`. */
  minDelayMs?: number;
  maxDelayMs?: number;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
}

const defaultSleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

export class SessionStream {
  /** The id of the last stored event delivered: the cursor a reconnect resumes after. */
  lastId: number;
  reconnects = 0;
  private readonly controller = new AbortController();
  private connection: AbortController | null = null;

  constructor(private readonly options: StreamOptions) {
    this.lastId = options.after;
  }

  start(): this {
    void this.run();
    return this;
  }

  stop(): void {
    this.controller.abort();
    this.options.onState?.("closed", this.reconnects);
  }

  /** Drop the current connection (as a network cut would); the stream reconnects by itself. */
  drop(): void {
    this.connection?.abort();
  }

  /** Deliver one event unless its id was delivered already (replays after a reconnect overlap). */
  accept(event: StreamEvent): boolean {
    if (event.id !== null) {
      if (event.id <= this.lastId) return false;
      this.lastId = event.id;
    }
    this.options.onEvent(event);
    return true;
  }

  private async run(): Promise<void> {
    const transport = this.options.transport ?? new SseTransport();
    const sleep = this.options.sleep ?? defaultSleep;
    const minDelay = this.options.minDelayMs ?? 250;
    const maxDelay = this.options.maxDelayMs ?? 5000;
    let delay = minDelay;
    let first = true;
    while (!this.controller.signal.aborted) {
      this.options.onState?.(first ? "connecting" : "reconnecting", this.reconnects);
      const connection = new AbortController();
      this.connection = connection;
      const onAbort = (): void => connection.abort();
      this.controller.signal.addEventListener("abort", onAbort);
      let delivered = false;
      try {
        await transport.connect(this.options.sessionId, this.lastId, connection.signal, (event) => {
          if (!delivered) {
            delivered = true;
            delay = minDelay;
            this.options.onState?.("live", this.reconnects);
          }
          this.accept(event);
        });
      } catch (error) {
        if (error instanceof StreamError && (error.status === 401 || error.status === 403 || error.status === 404)) {
          this.options.onState?.("closed", this.reconnects);
          return;
        }
      } finally {
        this.controller.signal.removeEventListener("abort", onAbort);
      }
      if (this.controller.signal.aborted) return;
      first = false;
      this.reconnects += 1;
      this.options.onState?.("reconnecting", this.reconnects);
      await sleep(delay, this.controller.signal);
      delay = Math.min(delay * 2, maxDelay);
    }
  }
}
