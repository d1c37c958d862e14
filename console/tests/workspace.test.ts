import { describe, expect, it } from "vitest";
import type { WorkspaceEntry } from "../src/types";
import {
  clientToolsFor,
  formatBytes,
  hasHostedTools,
  relativePath,
  serverToolNames,
  textOf,
  type WorkspaceNode,
  workspaceTree,
} from "../src/workspace";

const file = (path: string, bytes = 1, type = "file"): WorkspaceEntry => ({ path, type, bytes, modified_at: 0 });

function outline(node: WorkspaceNode, depth = 0): string[] {
  return node.children.flatMap((child) => [`${"  ".repeat(depth)}${child.name}${child.children.length || child.entry?.type === "directory" || !child.entry ? "/" : ""}`, ...outline(child, depth + 1)]);
}

describe("workspace", () => {
  it("folds the flat listing into a tree, directories first, each by name", () => {
    const tree = workspaceTree([
      file("/workspace/notes.txt"),
      file("/workspace/src/b.py"),
      file("/workspace/src/a.py"),
      file("/workspace/src/lib/deep.py"),
      file("/workspace/empty", 0, "directory"),
      file("/workspace/a.txt"),
    ]);
    expect(outline(tree)).toEqual(["empty/", "src/", "  lib/", "    deep.py", "  a.py", "  b.py", "a.txt", "notes.txt"]);
    const src = tree.children.find((n) => n.name === "src");
    expect(src?.path).toBe("src");
    expect(src?.children.find((n) => n.name === "a.py")?.entry?.path).toBe("/workspace/src/a.py");
  });

  it("names paths relative to the root", () => {
    expect(relativePath("/workspace/src/a.py")).toBe("src/a.py");
    expect(relativePath("/workspace")).toBe("");
    expect(relativePath("/elsewhere/x", "/elsewhere")).toBe("x");
  });

  it("tells text from binary content", () => {
    expect(textOf(new TextEncoder().encode("hello from the console"))).toBe("hello from the console");
    expect(textOf(new TextEncoder().encode("héllo ✓"))).toBe("héllo ✓");
    expect(textOf(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0]))).toBeNull();
    expect(textOf(new Uint8Array([0xff, 0xfe, 0x41]))).toBeNull();
    expect(textOf(new Uint8Array())).toBe("");
  });

  it("formats sizes", () => {
    expect(formatBytes(0)).toBe("0 bytes");
    expect(formatBytes(1)).toBe("1 byte");
    expect(formatBytes(22)).toBe("22 bytes");
    expect(formatBytes(1536)).toBe("1.5 KB");
    expect(formatBytes(300 * 1024 * 1024)).toBe("300 MB");
  });

  it("knows an agent with hosted tools", () => {
    expect(hasHostedTools({ tools: [{ type: "hosted" }] })).toBe(true);
    expect(hasHostedTools({ tool_spec: { Bash: { type: "hosted" } } })).toBe(true);
    expect(hasHostedTools({ environment: { type: "hosted", network: "none" } })).toBe(true);
    expect(hasHostedTools({ tools: [{ type: "lambda" }], tool_spec: { echo: { type: "lambda" } }, environment: null })).toBe(false);
    expect(hasHostedTools({})).toBe(false);
  });
});

describe("client tools for an agent with server tools", () => {
  const coding = ["Read", "Write", "Bash", "Todo"].map((name) => ({ type: "function", function: { name } }));

  it("leaves out the coding set's tools that the agent runs on the server", () => {
    const server = serverToolNames({
      tools: [
        { name: "Bash", runtime: "server", type: "hosted" },
        { name: "Read", runtime: "server", type: "hosted" },
        { name: "Lookup", runtime: "client" },
      ],
    });
    expect([...server].sort()).toEqual(["Bash", "Read"]);
    const offered = clientToolsFor(coding, server) as { function: { name: string } }[];
    expect(offered.map((t) => t.function.name)).toEqual(["Write", "Todo"]);
    expect(clientToolsFor([{ type: "function", name: "Bash" }], server)).toEqual([]);
  });

  it("offers the whole set to an agent without server tools (or not known yet)", () => {
    expect(clientToolsFor(coding, serverToolNames(null))).toEqual(coding);
    expect(clientToolsFor(undefined, new Set(["Bash"]))).toBeUndefined();
  });
});
