// A session's hosted workspace (GET /v1/sessions/{id}/workspace, docs/environments.md) as the
// session view shows it: the flat listing folded into a tree, sizes, and whether a file is text.

import type { WorkspaceEntry } from "./types";

export const WORKSPACE_ROOT = "/workspace";

export interface WorkspaceNode {
  name: string;
  /** relative to the workspace root ("src/app.py"); "" for the root */
  path: string;
  /** the listing's entry: a file, a symbolic link or an empty directory; absent for a directory that holds files */
  entry: WorkspaceEntry | null;
  children: WorkspaceNode[];
}

export function relativePath(path: string, root: string = WORKSPACE_ROOT): string {
  if (path === root) return "";
  return path.startsWith(`${root}/`) ? path.slice(root.length + 1) : path.replace(/^\/+/, "");
}

function isDirectory(node: WorkspaceNode): boolean {
  return node.entry === null || node.entry.type === "directory";
}

/** The listing as a tree: directories first, then files, each by name. */
export function workspaceTree(entries: WorkspaceEntry[], root: string = WORKSPACE_ROOT): WorkspaceNode {
  const top: WorkspaceNode = { name: "", path: "", entry: null, children: [] };
  const dirs = new Map<string, WorkspaceNode>([["", top]]);
  const dir = (path: string): WorkspaceNode => {
    const found = dirs.get(path);
    if (found) return found;
    const cut = path.lastIndexOf("/");
    const parent = dir(cut < 0 ? "" : path.slice(0, cut));
    const node: WorkspaceNode = { name: path.slice(cut + 1), path, entry: null, children: [] };
    parent.children.push(node);
    dirs.set(path, node);
    return node;
  };
  for (const entry of entries) {
    const rel = relativePath(entry.path, root);
    if (!rel) continue;
    if (entry.type === "directory") {
      dir(rel).entry = entry;
      continue;
    }
    const cut = rel.lastIndexOf("/");
    dir(cut < 0 ? "" : rel.slice(0, cut)).children.push({ name: rel.slice(cut + 1), path: rel, entry, children: [] });
  }
  const sort = (node: WorkspaceNode): void => {
    node.children.sort((a, b) => Number(isDirectory(b)) - Number(isDirectory(a)) || a.name.localeCompare(b.name));
    node.children.forEach(sort);
  };
  sort(top);
  return top;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} ${bytes === 1 ? "byte" : "bytes"}`;
  const units = ["KB", "MB", "GB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/** The file's text, or null when it is not text (a NUL byte, or not UTF-8). */
export function textOf(bytes: Uint8Array): string | null {
  if (bytes.subarray(0, 8192).includes(0)) return null;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

/** The agent a session runs (GET /v1/sessions/{id}/agent), as far as the session view reads it. */
export interface SessionAgent {
  tools?: { name?: string; runtime?: string; type?: string }[] | null;
  tool_spec?: unknown;
  environment?: unknown;
}

/** The names of the agent's tools that run on the server (hosted, Lambda, MCP). */
export function serverToolNames(agent: SessionAgent | null): Set<string> {
  return new Set(
    (agent?.tools ?? [])
      .filter((t) => t?.runtime === "server" || t?.type === "hosted")
      .map((t) => t.name ?? "")
      .filter(Boolean),
  );
}

function toolName(tool: unknown): string {
  const t = (tool ?? {}) as { name?: unknown; function?: { name?: unknown } };
  const name = t.function?.name ?? t.name;
  return typeof name === "string" ? name : "";
}

/**
 * A client tool set without the tools the agent runs on the server: a message's client tool wins a
 * name clash, so offering the coding set's Bash to an agent whose Bash is hosted would park every
 * call for someone to answer.
 */
export function clientToolsFor(tools: unknown[] | undefined, server: Set<string>): unknown[] | undefined {
  return tools?.filter((tool) => !server.has(toolName(tool)));
}

/** Whether the agent's tools (GET /v1/sessions/{id}/agent) include a hosted one, or it declares an environment. */
export function hasHostedTools(agent: SessionAgent): boolean {
  if ((agent.tools ?? []).some((t) => t?.type === "hosted")) return true;
  const spec = agent.tool_spec;
  if (spec && typeof spec === "object") {
    const declared = Array.isArray(spec) ? spec : Object.values(spec as Record<string, unknown>);
    if (declared.some((t) => !!t && typeof t === "object" && (t as { type?: unknown }).type === "hosted")) return true;
  }
  const env = agent.environment;
  return !!env && typeof env === "object" && (env as { type?: unknown }).type === "hosted";
}
