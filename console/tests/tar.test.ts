import { describe, expect, it } from "vitest";
import { tarFile } from "../src/tar";

describe("tarFile", () => {
  it("writes a ustar header with a valid checksum, the data and the end blocks", () => {
    const data = new TextEncoder().encode("name: a\n");
    const tar = tarFile("agent.yaml", data);
    expect(tar.length).toBe(512 * 4);
    const text = new TextDecoder().decode(tar.subarray(0, 512));
    expect(text.startsWith("agent.yaml\0")).toBe(true);
    expect(text.slice(257, 262)).toBe("ustar");
    expect(parseInt(text.slice(124, 135), 8)).toBe(data.length);
    const stored = parseInt(text.slice(148, 154), 8);
    const header = tar.slice(0, 512);
    header.fill(32, 148, 156);
    expect(header.reduce((a, b) => a + b, 0)).toBe(stored);
    expect(new TextDecoder().decode(tar.subarray(512, 512 + data.length))).toBe("name: a\n");
  });
});
