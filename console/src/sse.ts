// A server-sent events parser for fetch bodies (EventSource cannot send Authorization).
// Follows the HTML spec's field rules: id, event, data (joined by newlines), retry, comments.

export interface SseFrame {
  id: string | null;
  event: string;
  data: string;
  retry: number | null;
}

export class SseParser {
  private buffer = "";
  private id: string | null = null;
  private event = "";
  private data: string[] = [];
  private retry: number | null = null;

  /** Feed decoded text; returns the frames it completed. */
  push(chunk: string): SseFrame[] {
    this.buffer += chunk;
    const frames: SseFrame[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      if (!match) break;
      // a lone \r at the very end may be the first half of \r\n: wait for more
      if (match[0] === "\r" && match.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const frame = this.line(line);
      if (frame) frames.push(frame);
    }
    return frames;
  }

  private line(line: string): SseFrame | null {
    if (line === "") {
      if (this.data.length === 0 && this.retry === null) {
        this.event = "";
        return null;
      }
      const frame: SseFrame = { id: this.id, event: this.event || "message", data: this.data.join("\n"), retry: this.retry };
      this.event = "";
      this.data = [];
      this.retry = null;
      this.id = null;
      return frame;
    }
    if (line.startsWith(":")) return null;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.id = value;
    else if (field === "retry" && /^\d+$/.test(value)) this.retry = Number(value);
    return null;
  }
}
