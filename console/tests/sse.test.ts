import { describe, expect, it } from "vitest";
import { SseParser } from "../src/sse";

describe("SseParser", () => {
  it("parses frames split anywhere, with ids, events and multi-line data", () => {
    const text = 'retry: 1000\nevent: session.heartbeat\ndata: {"a":1}\n\nid: 7\nevent: x\ndata: one\ndata: two\n\n';
    const parser = new SseParser();
    const frames = [];
    for (const ch of text) frames.push(...parser.push(ch));
    expect(frames).toEqual([
      { id: null, event: "session.heartbeat", data: '{"a":1}', retry: 1000 },
      { id: "7", event: "x", data: "one\ntwo", retry: null },
    ]);
  });

  it("handles CRLF, comments and a CR split from its LF", () => {
    const parser = new SseParser();
    expect(parser.push(": keepalive\r\nid: 3\r\ndata: hi\r")).toEqual([]);
    expect(parser.push("\n\r\n")).toEqual([{ id: "3", event: "message", data: "hi", retry: null }]);
  });

  it("does not carry an id over to the next frame", () => {
    const parser = new SseParser();
    const frames = parser.push("id: 1\ndata: a\n\ndata: b\n\n");
    expect(frames.map((f) => f.id)).toEqual(["1", null]);
  });
});
