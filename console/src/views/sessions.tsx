import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, query } from "../api";
import { useApp } from "../context";
import { errorText, when } from "../format";
import { navigate, onLinkClick } from "../router";
import type { Agent, Page, SessionRow } from "../types";

const PAGE_SIZE = 20;

interface Filters {
  agent_name: string;
  status: string;
  label: string;
  search_query: string;
  owner: string;
}

const NO_FILTERS: Filters = { agent_name: "", status: "", label: "", search_query: "", owner: "" };

export function needsYou(row: SessionRow): number {
  return (row.pending_client_calls ?? 0) + (row.pending_elicitations_count ?? 0);
}

function SessionTable(props: { rows: SessionRow[]; caption: string }) {
  if (props.rows.length === 0) return <p class="empty">No sessions.</p>;
  return (
    <table class="list">
      <caption class="visually-hidden">{props.caption}</caption>
      <thead>
        <tr>
          <th scope="col">Title</th>
          <th scope="col">Agent</th>
          <th scope="col">Status</th>
          <th scope="col">Labels</th>
          <th scope="col">Owner</th>
          <th scope="col">Updated</th>
        </tr>
      </thead>
      <tbody>
        {props.rows.map((row) => {
          const waiting = needsYou(row);
          return (
            <tr key={row.id}>
              <td>
                <a href={`/sessions/${row.id}`} onClick={onLinkClick}>
                  {row.title || row.id.slice(0, 12)}
                </a>
                {waiting > 0 && (
                  <span class="badge attention" data-testid="needs-you">
                    needs you ({waiting})
                  </span>
                )}
              </td>
              <td>{row.agent_name}</td>
              <td>
                <span class={`status ${row.status}`}>{row.status}</span>
              </td>
              <td>
                {Object.entries(row.labels ?? {}).map(([k, v]) => (
                  <span class="label" key={k}>
                    {k}={v}
                  </span>
                ))}
              </td>
              <td>{row.owner}</td>
              <td>{when(row.updated_at)}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

export function SessionsView() {
  const { me } = useApp();
  const [filters, setFilters] = useState<Filters>(NO_FILTERS);
  const [applied, setApplied] = useState<Filters>(NO_FILTERS);
  const [cursors, setCursors] = useState<string[]>([]); // the `after` of each page shown before
  const [page, setPage] = useState<Page<SessionRow> | null>(null);
  const [agents, setAgents] = useState<Agent[]>([]);
  const [newAgent, setNewAgent] = useState("");
  const [error, setError] = useState<string | null>(null);
  const after = cursors[cursors.length - 1] ?? null;

  // Only the newest request may fill the page: an older one (the unfiltered first load, a refresh)
  // answering after a filter or page change would show rows whose cursor belongs to another listing.
  const latest = useRef(0);
  const load = useCallback(async (): Promise<void> => {
    const ticket = ++latest.current;
    try {
      const answer = await api<Page<SessionRow>>(`/v1/sessions${query({ ...applied, after, limit: PAGE_SIZE })}`);
      if (ticket !== latest.current) return;
      setPage(answer);
      setError(null);
    } catch (e) {
      if (ticket === latest.current) setError(errorText(e));
    }
  }, [applied, after]);

  useEffect(() => {
    void load();
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") void load();
    }, 5000);
    return () => clearInterval(timer);
  }, [load]);

  useEffect(() => {
    void api<Page<Agent>>("/v1/agents?scope=user&limit=100")
      .then((p) => {
        setAgents(p.data);
        setNewAgent((current) => current || p.data[0]?.id || "");
      })
      .catch(() => undefined);
  }, []);

  const create = async (): Promise<void> => {
    try {
      const created = await api<{ id: string }>("/v1/sessions", { method: "POST", json: { agent_id: newAgent } });
      navigate(`/sessions/${created.id}`);
    } catch (e) {
      setError(errorText(e));
    }
  };

  const set = (key: keyof Filters) => (event: Event) =>
    setFilters({ ...filters, [key]: (event.currentTarget as HTMLInputElement | HTMLSelectElement).value });

  return (
    <section>
      <h1>Sessions</h1>
      {me.can_write && agents.length > 0 && (
        <form
          class="inline"
          onSubmit={(event) => {
            event.preventDefault();
            void create();
          }}
        >
          <label htmlFor="new-agent">Agent for a new session</label>
          <select id="new-agent" value={newAgent} onChange={(e) => setNewAgent(e.currentTarget.value)}>
            {agents.map((a) => (
              <option key={a.id} value={a.id}>
                {a.name}
              </option>
            ))}
          </select>
          <button type="submit">New session</button>
        </form>
      )}
      <form
        class="filters"
        role="search"
        aria-label="Filter sessions"
        onSubmit={(event) => {
          event.preventDefault();
          setCursors([]);
          setApplied(filters);
        }}
      >
        <div>
          <label htmlFor="f-search">Title contains</label>
          <input id="f-search" type="search" value={filters.search_query} onInput={set("search_query")} />
        </div>
        <div>
          <label htmlFor="f-agent">Agent</label>
          <select id="f-agent" value={filters.agent_name} onChange={set("agent_name")}>
            <option value="">Any agent</option>
            {agents.map((a) => (
              <option key={a.name} value={a.name}>
                {a.name}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor="f-status">Status</label>
          <select id="f-status" value={filters.status} onChange={set("status")}>
            <option value="">Any status</option>
            <option value="idle">idle</option>
            <option value="running">running</option>
            <option value="failed">failed</option>
          </select>
        </div>
        <div>
          <label htmlFor="f-label">Label (key=value)</label>
          <input id="f-label" value={filters.label} onInput={set("label")} />
        </div>
        {me.admin && (
          <div>
            <label htmlFor="f-owner">Owner</label>
            <input id="f-owner" value={filters.owner} onInput={set("owner")} />
          </div>
        )}
        <button type="submit">Apply filters</button>
      </form>
      {error && <p role="alert">{error}</p>}
      {page && <SessionTable rows={page.data} caption="Sessions" />}
      <nav class="pager" aria-label="Pages">
        <button type="button" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
          Previous page
        </button>
        <button
          type="button"
          disabled={!page?.has_more}
          onClick={() => page?.last_id && setCursors([...cursors, page.last_id])}
        >
          Next page
        </button>
      </nav>
    </section>
  );
}

export function InboxView() {
  const { refreshInbox } = useApp();
  const [rows, setRows] = useState<SessionRow[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = (): void => {
      api<Page<SessionRow>>("/v1/sessions?waiting=true&limit=100")
        .then((p) => {
          setRows(p.data);
          setError(null);
        })
        .catch((e: unknown) => setError(errorText(e)));
    };
    load();
    refreshInbox();
    const timer = setInterval(load, 3000);
    return () => clearInterval(timer);
  }, [refreshInbox]);
  return (
    <section>
      <h1>Inbox</h1>
      <p class="hint">Sessions whose turn waits on you: a client tool call to answer, or a tool to approve.</p>
      {error && <p role="alert">{error}</p>}
      {rows && <SessionTable rows={rows} caption="Sessions that need you" />}
    </section>
  );
}
