import { describe, expect, it } from "vitest";
import { SessionStream } from "../src/stream";
import type { StreamEvent } from "../src/types";

const ev = (id: number | null, type = "x"): StreamEvent => ({ id, type, data: { type } });

describe("SessionStream.accept", () => {
  it("delivers each stored event once, in order, and moves the resume cursor", () => {
    const seen: (number | null)[] = [];
    const stream = new SessionStream({ sessionId: "s", after: 5, onEvent: (e) => seen.push(e.id) });
    // a reconnect's replay overlaps what was delivered: 5 and 6 again
    for (const id of [6, 7, 5, 6, 7, 8]) stream.accept(ev(id));
    expect(seen).toEqual([6, 7, 8]);
    expect(stream.lastId).toBe(8);
  });

  it("always delivers heartbeats (no id) without moving the cursor", () => {
    const seen: (number | null)[] = [];
    const stream = new SessionStream({ sessionId: "s", after: 0, onEvent: (e) => seen.push(e.id) });
    stream.accept(ev(null, "session.heartbeat"));
    stream.accept(ev(1));
    stream.accept(ev(null, "session.heartbeat"));
    expect(seen).toEqual([null, 1, null]);
    expect(stream.lastId).toBe(1);
  });
});
