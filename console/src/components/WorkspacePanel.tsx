import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, query, request } from "../api";
import { errorText } from "../format";
import type { EnvironmentState, WorkspaceEntry, WorkspaceListing } from "../types";
import { formatBytes, relativePath, textOf, type WorkspaceNode, workspaceTree } from "../workspace";

/** Files larger than this are offered for download only, never read into the page. */
const VIEW_MAX_BYTES = 1024 * 1024;

type Viewed =
  | { path: string; state: "loading" }
  | { path: string; state: "text"; text: string }
  | { path: string; state: "binary" | "large"; bytes: number }
  | { path: string; state: "error"; message: string };

function Node(props: {
  node: WorkspaceNode;
  onView: (entry: WorkspaceEntry) => void;
  onDownload: (entry: WorkspaceEntry) => void;
}) {
  const { node } = props;
  const entry = node.entry;
  if (entry === null || entry.type === "directory") {
    return (
      <li class="ws-dir">
        <span class="ws-name">
          {node.name}/{node.children.length === 0 && <span class="hint"> (empty)</span>}
        </span>
        {node.children.length > 0 && (
          <ul>
            {node.children.map((child) => (
              <Node key={child.path} node={child} onView={props.onView} onDownload={props.onDownload} />
            ))}
          </ul>
        )}
      </li>
    );
  }
  return (
    <li class="ws-file" data-path={entry.path}>
      <span class="ws-name">
        {node.name}
        {entry.type === "symlink" && <span class="hint"> (link)</span>}{" "}
        <span class="hint">({formatBytes(entry.bytes)})</span>
      </span>
      <span class="ws-actions">
        <button type="button" class="link" aria-label={`View ${node.path}`} onClick={() => props.onView(entry)}>
          View
        </button>
        <button type="button" class="link" aria-label={`Download ${node.path}`} onClick={() => props.onDownload(entry)}>
          Download
        </button>
      </span>
    </li>
  );
}

/** What the workspace's last lifecycle event (`session.environment`) means for the person watching. */
function EnvironmentLine(props: { state: EnvironmentState }) {
  const { status, restored, error } = props.state;
  if (status === "failed") {
    return (
      <p role="alert" data-testid="environment-status">
        The workspace's setup failed{error ? `: ${error}` : ""}. The next hosted call tries it again.
      </p>
    );
  }
  const text =
    status === "pending"
      ? restored
        ? "Restoring the workspace…"
        : "Setting up the workspace…"
      : status === "ready"
        ? restored
          ? "Workspace restored."
          : "Workspace ready."
        : status === "suspended"
          ? "Suspended while idle: the next hosted call restores it."
          : `Workspace ${status}.`;
  return (
    <p class="hint" role="status" data-testid="environment-status">
      {text}
    </p>
  );
}

/**
 * The session's hosted workspace (/workspace): a tree of its files with their sizes, each viewable
 * inline (text) and downloadable. Shown for an agent with hosted tools (`hosted`, null while the
 * agent is not known), or once the listing has anything or the stream told of it; `refresh` changes when a
 * turn ends or the workspace's lifecycle moves; `environment` is that lifecycle's last event.
 */
export function WorkspacePanel(props: {
  sessionId: string;
  hosted: boolean | null;
  refresh: number;
  environment: EnvironmentState | null;
}) {
  const [entries, setEntries] = useState<WorkspaceEntry[] | null>(null);
  const [root, setRoot] = useState("/workspace");
  const [totalBytes, setTotalBytes] = useState(0);
  const [shown, setShown] = useState(false);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [viewed, setViewed] = useState<Viewed | null>(null);
  const viewing = useRef<string | null>(null);
  const base = `/v1/sessions/${props.sessionId}/workspace`;

  const view = useCallback(
    async (entry: WorkspaceEntry): Promise<void> => {
      viewing.current = entry.path;
      if (entry.bytes > VIEW_MAX_BYTES) {
        setViewed({ path: entry.path, state: "large", bytes: entry.bytes });
        return;
      }
      setViewed((v) => (v?.path === entry.path && v.state === "text" ? v : { path: entry.path, state: "loading" }));
      try {
        const response = await request(`${base}/content${query({ path: entry.path })}`);
        const bytes = new Uint8Array(await response.arrayBuffer());
        if (viewing.current !== entry.path) return;
        const text = textOf(bytes);
        setViewed(
          text === null
            ? { path: entry.path, state: "binary", bytes: bytes.length }
            : { path: entry.path, state: "text", text },
        );
      } catch (e) {
        if (viewing.current === entry.path) setViewed({ path: entry.path, state: "error", message: errorText(e) });
      }
    },
    [base],
  );

  const load = useCallback(async (): Promise<void> => {
    setLoading(true);
    try {
      const listing = await api<WorkspaceListing>(base);
      setEntries(listing.data);
      setRoot(listing.root || "/workspace");
      setTotalBytes(listing.total_bytes);
      setError(null);
      if (listing.data.length > 0) setShown(true);
      // the file on view may have changed in the turn: show it as it is now (or close it when it is gone)
      const open = viewing.current;
      if (open) {
        const still = listing.data.find((e) => e.path === open && e.type !== "directory");
        if (still) void view(still);
        else {
          viewing.current = null;
          setViewed(null);
        }
      }
    } catch (e) {
      setError(errorText(e));
    } finally {
      setLoading(false);
    }
  }, [base, view]);

  useEffect(() => void load(), [load, props.refresh]);

  const download = async (entry: WorkspaceEntry): Promise<void> => {
    try {
      const response = await request(`${base}/content${query({ path: entry.path })}`);
      const url = URL.createObjectURL(await response.blob());
      const a = document.createElement("a");
      a.href = url;
      a.download = entry.path.slice(entry.path.lastIndexOf("/") + 1) || "file";
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      setError(errorText(e));
    }
  };

  const close = (): void => {
    viewing.current = null;
    setViewed(null);
  };

  const hosted = props.hosted;
  if (entries === null || hosted === null) return null; // not known yet
  if (!hosted && !shown && entries.length === 0 && !props.environment) return null; // this session has no workspace
  const tree = workspaceTree(entries, root);
  const files = entries.filter((e) => e.type !== "directory").length;
  const viewedName = viewed ? relativePath(viewed.path, root) : "";

  return (
    <section class="panel workspace" aria-labelledby="workspace-h" aria-busy={loading}>
      <div class="panel-head">
        <h2 id="workspace-h">Workspace</h2>
        <button
          type="button"
          class="link"
          aria-label="Refresh the workspace"
          disabled={loading}
          onClick={() => void load()}
        >
          Refresh
        </button>
      </div>
      {props.environment && <EnvironmentLine state={props.environment} />}
      {error && <p role="alert">{error}</p>}
      {entries.length === 0 ? (
        <p class="hint">{hosted ? "The workspace is empty." : "No hosted workspace."}</p>
      ) : (
        <>
          <p class="hint">
            <code>{root}</code> · {files} {files === 1 ? "file" : "files"} · {formatBytes(totalBytes)}
          </p>
          <ul class="ws-tree" aria-label="Workspace files">
            {tree.children.map((node) => (
              <Node key={node.path} node={node} onView={(e) => void view(e)} onDownload={(e) => void download(e)} />
            ))}
          </ul>
        </>
      )}
      {viewed && (
        <div class="ws-viewer" data-testid="workspace-viewer">
          <div class="panel-head">
            <code>{viewedName}</code>
            <button type="button" class="link" aria-label={`Close ${viewedName}`} onClick={close}>
              Close
            </button>
          </div>
          {viewed.state === "loading" && <p role="status">Loading…</p>}
          {viewed.state === "text" && (
            <pre class="ws-content" role="region" aria-label={`Contents of ${viewedName}`} tabIndex={0}>
              {viewed.text || <span class="hint">(empty file)</span>}
            </pre>
          )}
          {viewed.state === "binary" && (
            <p class="hint">Binary file ({formatBytes(viewed.bytes)}): download it to open it.</p>
          )}
          {viewed.state === "large" && (
            <p class="hint">Too large to show here ({formatBytes(viewed.bytes)}): download it to open it.</p>
          )}
          {viewed.state === "error" && <p role="alert">{viewed.message}</p>}
        </div>
      )}
    </section>
  );
}
