import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, messageEvent, query, request } from "../api";
import { useApp } from "../context";
import { UsageChart } from "../components/UsageChart";
import { VirtualList } from "../components/VirtualList";
import { WorkspacePanel } from "../components/WorkspacePanel";
import { errorText, when } from "../format";
import { navigate } from "../router";
import { type ConnectionState, SessionStream } from "../stream";
import { detailsText, type Entry, type EntryOf, Timeline } from "../timeline";
import type { FileResource, Item, Page, Snapshot, UsageReport } from "../types";
import { cost, formatCost, formatTokens, type Price } from "../usage";
import { clientToolsFor, hasHostedTools, type SessionAgent, serverToolNames } from "../workspace";

const OUTPUT_PREVIEW_CHARS = 1500;
const OLDER_PAGE = 1000; // /items' largest page: each page reads the session's items once on the server
const TOOL_SET_KEY = "skyloop.toolSet";

/** A client tool set (GET /v1/tool_sets): offered with a message, each call answered by typing its output. */
interface ToolSet {
  name: string;
  tools: unknown[];
}

function prettyArgs(args: string): string {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}

const STATUS_TEXT: Record<string, string> = {
  running: "running",
  waiting: "waiting for your output",
  approval: "waiting for approval",
  denied: "denied",
  done: "done",
  cancelled: "cancelled",
};

function ToolRow(props: { entry: EntryOf<"tool"> }) {
  const { entry } = props;
  const [full, setFull] = useState(false);
  // a hosted command's output streams in (`live`) until its output item replaces it
  const streaming = entry.output === null && entry.live !== "";
  const output = entry.output ?? entry.live;
  const long = output.length > OUTPUT_PREVIEW_CHARS;
  const server = entry.runsOn === "server";
  const status = entry.status === "running" && server ? "running on the server" : STATUS_TEXT[entry.status];
  const details = detailsText(entry.details);
  const exitCode = entry.details?.exit_code;
  const failed = entry.details?.timed_out === true || (typeof exitCode === "number" && exitCode !== 0);
  // while it streams the newest lines matter: the preview keeps the end, not the start
  const preview =
    full || !long
      ? output
      : streaming
        ? `…${output.slice(-OUTPUT_PREVIEW_CHARS)}`
        : `${output.slice(0, OUTPUT_PREVIEW_CHARS)}…`;
  return (
    <div
      class={`entry tool ${entry.status}`}
      data-kind="tool"
      data-call-id={entry.callId}
      data-runs-on={entry.runsOn ?? undefined}
      aria-busy={streaming}
    >
      <div class="who">
        Tool call <code>{entry.name || entry.callId}</code>
        {server && <span class="where">on the server</span>}
        <span class={`chip ${entry.status}`}>{status}</span>
      </div>
      <pre class="args">{prettyArgs(entry.arguments)}</pre>
      {(entry.output !== null || streaming) && (
        <>
          <pre class={streaming ? "output live" : "output"} data-testid="tool-output">
            {preview}
          </pre>
          {long && (
            <button type="button" class="link" onClick={() => setFull(!full)}>
              {full ? "Show less" : `Show all ${output.length} characters`}
            </button>
          )}
        </>
      )}
      {details && (
        <p class={`hint tool-details${failed ? " failed" : ""}`} data-testid="tool-details">
          {details}
          {entry.details?.output_file_id && " · the whole output is kept as a session file (Files)"}
        </p>
      )}
    </div>
  );
}

function EntryRow(props: { entry: Entry; price: Price | null }) {
  const { entry } = props;
  switch (entry.kind) {
    case "user":
      return (
        <div class="entry user" data-kind="user">
          <div class="who">You</div>
          <div class="text">{entry.text}</div>
        </div>
      );
    case "assistant":
      return (
        <div class="entry assistant" data-kind="assistant" aria-busy={entry.streaming}>
          <div class="who">Assistant{entry.streaming && <span class="chip running">writing…</span>}</div>
          <div class="text">{entry.text}</div>
        </div>
      );
    case "tool":
      return <ToolRow entry={entry} />;
    case "error":
      return (
        <div class="entry error" data-kind="error">
          <div class="who">Error {entry.code}</div>
          <div class="text">{entry.message}</div>
        </div>
      );
    case "notice":
      return (
        <div class="entry notice" data-kind="notice">
          {entry.text}
        </div>
      );
    case "usage":
      return (
        <div class="entry usage" data-kind="usage">
          Turn used {formatTokens(entry.usage.input_tokens)} input and {formatTokens(entry.usage.output_tokens)}{" "}
          output tokens · {formatCost(cost(entry.usage, props.price))}
        </div>
      );
  }
}

function Waiting(props: { sessionId: string; tools: EntryOf<"tool">[]; canWrite: boolean; onError: (e: string) => void }) {
  const [outputs, setOutputs] = useState<Record<string, string>>({});
  const [sent, setSent] = useState<Record<string, boolean>>({});
  if (props.tools.length === 0) return null;
  const post = async (callId: string, body: unknown): Promise<void> => {
    setSent((s) => ({ ...s, [callId]: true }));
    try {
      await request(`/v1/sessions/${props.sessionId}/events`, { method: "POST", json: body });
    } catch (e) {
      setSent((s) => ({ ...s, [callId]: false }));
      props.onError(errorText(e));
    }
  };
  return (
    <section class="panel waiting" aria-labelledby="waiting-h">
      <h2 id="waiting-h">Waiting on you</h2>
      {props.tools.map((tool) =>
        tool.status === "approval" ? (
          <div class="ask" key={tool.key} data-testid="approval">
            <p>
              Allow <code>{tool.name}</code> to run?
            </p>
            <pre>{prettyArgs(tool.arguments)}</pre>
            {props.canWrite && (
              <div class="row">
                <button
                  type="button"
                  disabled={sent[tool.callId]}
                  aria-label={`Approve ${tool.name}`}
                  onClick={() =>
                    void post(tool.callId, { type: "approval", data: { elicitation_id: tool.elicitationId, action: "accept" } })
                  }
                >
                  Approve
                </button>
                <button
                  type="button"
                  class="secondary"
                  disabled={sent[tool.callId]}
                  aria-label={`Deny ${tool.name}`}
                  onClick={() =>
                    void post(tool.callId, { type: "approval", data: { elicitation_id: tool.elicitationId, action: "decline" } })
                  }
                >
                  Deny
                </button>
              </div>
            )}
          </div>
        ) : (
          <form
            class="ask"
            key={tool.key}
            data-testid="client-call"
            onSubmit={(event) => {
              event.preventDefault();
              void post(tool.callId, {
                type: "function_call_output",
                data: { call_id: tool.callId, output: outputs[tool.callId] ?? "" },
              });
            }}
          >
            <p>
              <code>{tool.name}</code> runs on the client: type what it returned.
            </p>
            <pre>{prettyArgs(tool.arguments)}</pre>
            {props.canWrite && (
              <>
                <label htmlFor={`out-${tool.callId}`}>Output of {tool.name}</label>
                <textarea
                  id={`out-${tool.callId}`}
                  rows={3}
                  value={outputs[tool.callId] ?? ""}
                  onInput={(e) => setOutputs((o) => ({ ...o, [tool.callId]: e.currentTarget.value }))}
                />
                <button type="submit" disabled={sent[tool.callId]}>
                  Send output
                </button>
              </>
            )}
          </form>
        ),
      )}
    </section>
  );
}

function Files(props: { sessionId: string; canWrite: boolean }) {
  const [files, setFiles] = useState<FileResource[]>([]);
  const [error, setError] = useState<string | null>(null);
  const base = `/v1/sessions/${props.sessionId}/resources/files`;
  const load = useCallback(async (): Promise<void> => {
    try {
      setFiles((await api<Page<FileResource>>(`${base}?limit=100`)).data);
    } catch (e) {
      setError(errorText(e));
    }
  }, [base]);
  useEffect(() => void load(), [load]);
  const upload = async (file: File): Promise<void> => {
    try {
      await request(`${base}${query({ filename: file.name })}`, {
        method: "POST",
        body: file,
        headers: { "Content-Type": file.type || "application/octet-stream" },
      });
      await load();
    } catch (e) {
      setError(errorText(e));
    }
  };
  const download = async (file: FileResource): Promise<void> => {
    const response = await request(`${base}/${file.id}/content`);
    const url = URL.createObjectURL(await response.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = file.metadata.filename;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  };
  const remove = async (file: FileResource): Promise<void> => {
    try {
      await request(`${base}/${file.id}`, { method: "DELETE" });
      await load();
    } catch (e) {
      setError(errorText(e));
    }
  };
  return (
    <section class="panel" aria-labelledby="files-h">
      <h2 id="files-h">Files</h2>
      {error && <p role="alert">{error}</p>}
      {files.length === 0 ? (
        <p class="hint">No files.</p>
      ) : (
        <ul class="files">
          {files.map((f) => (
            <li key={f.id}>
              <span>
                {f.metadata.filename} <span class="hint">({f.metadata.bytes} bytes)</span>
              </span>
              <button type="button" class="link" aria-label={`Download ${f.metadata.filename}`} onClick={() => void download(f)}>
                Download
              </button>
              {props.canWrite && (
                <button type="button" class="link" aria-label={`Delete ${f.metadata.filename}`} onClick={() => void remove(f)}>
                  Delete
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
      {props.canWrite && (
        <>
          <label htmlFor="upload">Upload a file</label>
          <input
            id="upload"
            type="file"
            onChange={(e) => {
              const file = e.currentTarget.files?.[0];
              if (file) void upload(file);
              e.currentTarget.value = "";
            }}
          />
        </>
      )}
    </section>
  );
}

function UsagePanel(props: { report: UsageReport | null }) {
  const report = props.report;
  if (!report) return null;
  const price = report.price;
  return (
    <section class="panel" aria-labelledby="usage-h">
      <h2 id="usage-h">Usage</h2>
      <p data-testid="usage-total">
        {formatTokens(report.usage.input_tokens)} input · {formatTokens(report.usage.output_tokens)} output tokens
        {" · "}
        {price ? formatCost(report.cost_usd) : `no price known for ${report.model ?? "this model"}`}
      </p>
      <UsageChart turns={report.turns} />
      {report.turns.length > 0 && (
        <details>
          <summary>Per-turn figures</summary>
          <table class="list compact">
            <caption class="visually-hidden">Tokens and cost per turn</caption>
            <thead>
              <tr>
                <th scope="col">Turn</th>
                <th scope="col">Input</th>
                <th scope="col">Output</th>
                <th scope="col">Cost</th>
              </tr>
            </thead>
            <tbody>
              {report.turns.map((t) => (
                <tr key={t.response_id}>
                  <td>{when(t.created_at)}</td>
                  <td>{t.input_tokens}</td>
                  <td>{t.output_tokens}</td>
                  <td>{formatCost(t.cost_usd)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </details>
      )}
    </section>
  );
}

export function SessionView(props: { id: string }) {
  const { me, refreshInbox } = useApp();
  const timeline = useMemo(() => new Timeline(), []);
  const [snapshot, setSnapshot] = useState<Snapshot | null>(null);
  const [version, setVersion] = useState(0);
  const [connection, setConnection] = useState<{ state: ConnectionState; reconnects: number }>({
    state: "connecting",
    reconnects: 0,
  });
  const [error, setError] = useState<string | null>(null);
  const [message, setMessage] = useState("");
  const [usage, setUsage] = useState<UsageReport | null>(null);
  const [toolSets, setToolSets] = useState<ToolSet[]>([]);
  const [toolSet, setToolSet] = useState(sessionStorage.getItem(TOOL_SET_KEY) ?? "coding");
  const [older, setOlder] = useState<{ cursor: string | null; loading: boolean }>({ cursor: null, loading: false });
  // the workspace panel lists its files again when a turn ends or the workspace's lifecycle moves
  const [turnsEnded, setTurnsEnded] = useState(0);
  const [agent, setAgent] = useState<SessionAgent | null>(null);
  const frame = useRef(0);
  // stored events applied, and the cursor they started after: each id once, none missing
  const delivered = useRef({ from: 0, count: 0, last: 0 });

  const refreshUsage = useCallback((): void => {
    void api<UsageReport>(`/v1/sessions/${props.id}/usage`)
      .then(setUsage)
      .catch(() => undefined);
  }, [props.id]);

  useEffect(() => {
    let stream: SessionStream | null = null;
    let cancelled = false;
    const render = (): void => {
      if (frame.current) return;
      frame.current = requestAnimationFrame(() => {
        frame.current = 0;
        setVersion(timeline.version);
      });
    };
    void (async () => {
      try {
        const snap = await api<Snapshot>(`/v1/sessions/${props.id}`);
        if (cancelled) return;
        timeline.addItems(snap.items);
        timeline.markWaiting(snap.waiting ?? []);
        timeline.status = snap.status;
        setSnapshot(snap);
        setOlder({ cursor: snap.has_more_items ? (snap.items[0]?.id ?? null) : null, loading: false });
        render();
        delivered.current = { from: snap.last_event_id, count: 0, last: snap.last_event_id };
        stream = new SessionStream({
          sessionId: props.id,
          after: snap.last_event_id,
          onEvent: (event) => {
            if (event.id !== null) delivered.current = { ...delivered.current, count: delivered.current.count + 1, last: event.id };
            timeline.apply(event);
            if (event.type === "response.completed" || event.type === "response.failed") refreshUsage();
            if (
              event.type === "response.completed" ||
              event.type === "response.failed" ||
              event.type === "response.cancelled" ||
              event.type === "session.environment"
            )
              setTurnsEnded((n) => n + 1);
            if (event.type === "session.status" || event.type.startsWith("response.elicitation")) refreshInbox();
            render();
          },
          onState: (state, reconnects) => setConnection({ state, reconnects }),
        }).start();
      } catch (e) {
        setError(errorText(e));
      }
    })();
    refreshUsage();
    return () => {
      cancelled = true;
      stream?.stop();
      cancelAnimationFrame(frame.current);
      frame.current = 0;
    };
  }, [props.id, timeline, refreshUsage, refreshInbox]);

  useEffect(() => {
    let cancelled = false;
    void api<SessionAgent>(`/v1/sessions/${props.id}/agent`)
      .then((a) => !cancelled && setAgent(a))
      .catch(() => !cancelled && setAgent({ tools: [] })); // an agent since deleted: nothing hosted known
    return () => {
      cancelled = true;
    };
  }, [props.id]);

  useEffect(() => {
    void api<Page<ToolSet>>("/v1/tool_sets")
      .then((p) => setToolSets(p.data))
      .catch(() => undefined);
  }, []);

  const loadOlder = useCallback(async (): Promise<void> => {
    if (!older.cursor || older.loading) return;
    setOlder({ ...older, loading: true });
    try {
      const page = await api<Page<Item>>(
        `/v1/sessions/${props.id}/items${query({ order: "desc", after: older.cursor, limit: OLDER_PAGE })}`,
      );
      timeline.prependItems([...page.data].reverse());
      setVersion(timeline.version);
      setOlder({ cursor: page.has_more ? page.last_id : null, loading: false });
    } catch (e) {
      setError(errorText(e));
      setOlder({ ...older, loading: false });
    }
  }, [older, props.id, timeline]);

  const post = async (body: unknown): Promise<boolean> => {
    try {
      await request(`/v1/sessions/${props.id}/events`, { method: "POST", json: body });
      return true;
    } catch (e) {
      setError(errorText(e));
      return false;
    }
  };

  const send = async (): Promise<void> => {
    const text = message.trim();
    if (!text) return;
    // the agent's own server tools (hosted Bash, Read, ...) are not offered again as client tools
    const tools = clientToolsFor(toolSets.find((t) => t.name === toolSet)?.tools, serverToolNames(agent));
    if (await post(messageEvent(text, tools))) setMessage("");
  };

  const fork = async (): Promise<void> => {
    try {
      const created = await api<{ id: string }>(`/v1/sessions/${props.id}/fork`, { method: "POST", json: {} });
      navigate(`/sessions/${created.id}`);
    } catch (e) {
      setError(errorText(e));
    }
  };

  const exportItems = async (): Promise<void> => {
    try {
      const lines: string[] = [];
      let after: string | null = null;
      for (;;) {
        const page: Page<Item> = await api<Page<Item>>(
          `/v1/sessions/${props.id}/items${query({ order: "asc", limit: 1000, after })}`,
        );
        for (const item of page.data) lines.push(JSON.stringify(item));
        if (!page.has_more || !page.last_id) break;
        after = page.last_id;
      }
      const url = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], { type: "application/x-ndjson" }));
      const a = document.createElement("a");
      a.href = url;
      a.download = `session-${props.id}.jsonl`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      setError(errorText(e));
    }
  };

  if (error && !snapshot) {
    return (
      <section>
        <h1>Session</h1>
        <p role="alert">{error}</p>
      </section>
    );
  }
  if (!snapshot) return <p role="status">Loading session…</p>;

  void version; // re-rendered through `version`; the timeline is read directly below
  const status = timeline.status;
  const running = status === "running";
  const price = usage?.price ?? null;
  const connectionText =
    connection.state === "live"
      ? "Live"
      : connection.state === "reconnecting"
        ? "Reconnecting…"
        : connection.state === "connecting"
          ? "Connecting…"
          : "Disconnected";

  return (
    <div class="session">
      <div class="session-main">
        <header class="session-head">
          <div>
            <h1>{snapshot.title || snapshot.id}</h1>
            <p class="hint">
              {snapshot.agent_name} · <span class={`status ${status}`} data-testid="session-status">{status}</span> ·{" "}
              <span
                role="status"
                data-testid="connection"
                data-reconnects={connection.reconnects}
                data-from={delivered.current.from}
                data-events={delivered.current.count}
                data-last-id={delivered.current.last}
              >
                {connectionText}
                {connection.reconnects > 0 && ` (reconnected ${connection.reconnects}×)`}
              </span>
            </p>
          </div>
          <div class="row">
            {me.can_write && running && (
              <button type="button" class="danger" onClick={() => void post({ type: "interrupt" })}>
                Interrupt
              </button>
            )}
            {me.can_write && (
              <button type="button" class="secondary" onClick={() => void fork()}>
                Fork
              </button>
            )}
            <button type="button" class="secondary" onClick={() => void exportItems()}>
              Export
            </button>
          </div>
        </header>
        {error && <p role="alert">{error}</p>}
        {older.cursor && (
          <button type="button" class="link older" disabled={older.loading} onClick={() => void loadOlder()}>
            {older.loading ? "Loading earlier turns…" : "Load earlier turns"}
          </button>
        )}
        <VirtualList
          items={timeline.entries}
          version={timeline.version}
          keyOf={(e) => e.key}
          render={(e) => <EntryRow entry={e} price={price} />}
          label="Conversation"
          onNearTop={() => void loadOlder()}
        />
        {me.can_write ? (
          <form
            class="composer"
            onSubmit={(event) => {
              event.preventDefault();
              void send();
            }}
          >
            <label htmlFor="message" class="visually-hidden">
              Message
            </label>
            <textarea
              id="message"
              rows={2}
              placeholder="Message the agent (Ctrl+Enter sends)"
              value={message}
              onInput={(e) => setMessage(e.currentTarget.value)}
              onKeyDown={(e) => {
                if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
                  e.preventDefault();
                  void send();
                }
              }}
            />
            <div class="composer-side">
              <label htmlFor="tool-set">Client tools</label>
              <select
                id="tool-set"
                value={toolSet}
                onChange={(e) => {
                  setToolSet(e.currentTarget.value);
                  sessionStorage.setItem(TOOL_SET_KEY, e.currentTarget.value);
                }}
              >
                <option value="">None</option>
                {toolSets.map((t) => (
                  <option key={t.name} value={t.name}>
                    {t.name} (you answer)
                  </option>
                ))}
              </select>
              <button type="submit">Send</button>
            </div>
          </form>
        ) : (
          <p class="hint readonly-note">This token is read-only: you can watch this session but not steer it.</p>
        )}
      </div>
      <aside class="session-side" aria-label="Session details">
        <Waiting sessionId={props.id} tools={timeline.waiting()} canWrite={me.can_write} onError={setError} />
        <UsagePanel report={usage} />
        <WorkspacePanel
          sessionId={props.id}
          hosted={agent && hasHostedTools(agent)}
          refresh={turnsEnded}
          environment={timeline.environment}
        />
        <Files sessionId={props.id} canWrite={me.can_write} />
        <section class="panel" aria-labelledby="details-h">
          <h2 id="details-h">Details</h2>
          <dl>
            <dt>Id</dt>
            <dd>
              <code>{snapshot.id}</code>
            </dd>
            <dt>Model</dt>
            <dd>{snapshot.llm_model ?? "—"}</dd>
            <dt>Owner</dt>
            <dd>{snapshot.owner}</dd>
            <dt>Created</dt>
            <dd>{when(snapshot.created_at)}</dd>
            {snapshot.parent_session_id && (
              <>
                <dt>Forked from</dt>
                <dd>
                  <a href={`/sessions/${snapshot.parent_session_id}`}>{snapshot.parent_session_id.slice(0, 12)}</a>
                </dd>
              </>
            )}
          </dl>
        </section>
      </aside>
    </div>
  );
}
