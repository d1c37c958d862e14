import { useCallback, useEffect, useState } from "preact/hooks";
import { ApiError, api, request } from "../api";
import { useApp } from "../context";
import { errorText, when } from "../format";
import { navigate, onLinkClick } from "../router";
import { gzip, tarFile } from "../tar";
import type { Agent, Page } from "../types";

/** Register from a file: JSON is posted as the spec; YAML travels as a one-file bundle the server parses. */
async function register(file: File): Promise<Agent> {
  const text = await file.text();
  if (file.name.endsWith(".json")) {
    return await api<Agent>("/v1/agents", { method: "POST", json: JSON.parse(text) as unknown });
  }
  const bundle = await gzip(tarFile("agent.yaml", new TextEncoder().encode(text)));
  const form = new FormData();
  form.append("bundle", bundle, "agent.tar.gz");
  return await api<Agent>("/v1/agents", { method: "POST", body: form });
}

export function AgentsView() {
  const { me } = useApp();
  const [agents, setAgents] = useState<Agent[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const load = useCallback(async (): Promise<void> => {
    try {
      setAgents((await api<Page<Agent>>("/v1/agents?scope=user&limit=100")).data);
    } catch (e) {
      setError(errorText(e));
    }
  }, []);
  useEffect(() => void load(), [load]);
  return (
    <section>
      <h1>Agents</h1>
      {me.can_write && (
        <div class="inline">
          <label htmlFor="agent-file">Register an agent from a YAML or JSON file</label>
          <input
            id="agent-file"
            type="file"
            accept=".yaml,.yml,.json"
            onChange={(e) => {
              const file = e.currentTarget.files?.[0];
              e.currentTarget.value = "";
              if (!file) return;
              register(file)
                .then(async (agent) => {
                  setNotice(`Registered ${agent.name} (version ${agent.version ?? 1}).`);
                  setError(null);
                  await load();
                })
                .catch((err: unknown) => setError(errorText(err)));
            }}
          />
        </div>
      )}
      {notice && <p role="status">{notice}</p>}
      {error && <p role="alert">{error}</p>}
      {agents && agents.length === 0 && <p class="empty">No agents.</p>}
      {agents && agents.length > 0 && (
        <table class="list">
          <caption class="visually-hidden">Agents</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Version</th>
              <th scope="col">Tools</th>
              <th scope="col">Registered</th>
            </tr>
          </thead>
          <tbody>
            {agents.map((a) => (
              <tr key={a.id}>
                <td>
                  <a href={`/agents/${a.id}`} onClick={onLinkClick}>
                    {a.name}
                  </a>
                </td>
                <td>{a.version ?? ""}</td>
                <td>{(a.tools ?? []).map((t) => t.name).join(", ")}</td>
                <td>{when(a.created_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function AgentView(props: { id: string }) {
  const { me } = useApp();
  const [agent, setAgent] = useState<Agent | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [confirm, setConfirm] = useState<string | null>(null);
  useEffect(() => {
    api<Agent>(`/v1/agents/${props.id}`)
      .then(setAgent)
      .catch((e: unknown) => setError(errorText(e)));
  }, [props.id]);
  const remove = async (force: boolean): Promise<void> => {
    try {
      await request(`/v1/agents/${props.id}${force ? "?force=true" : ""}`, { method: "DELETE" });
      navigate("/agents");
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) setConfirm(e.message);
      else setError(errorText(e));
    }
  };
  if (error) {
    return (
      <section>
        <h1>Agent</h1>
        <p role="alert">{error}</p>
      </section>
    );
  }
  if (!agent) return <p role="status">Loading agent…</p>;
  return (
    <section>
      <h1>{agent.name}</h1>
      <p class="hint">
        Version {agent.version ?? 1} · registered {when(agent.created_at)} · <code>{agent.id}</code>
      </p>
      {me.can_write && (
        <div class="row">
          <button type="button" class="danger" onClick={() => void remove(false)}>
            Delete agent
          </button>
        </div>
      )}
      {confirm && (
        <div role="alertdialog" aria-labelledby="confirm-h" class="panel">
          <h2 id="confirm-h">Sessions still use this agent</h2>
          <p>{confirm}</p>
          <div class="row">
            <button type="button" class="danger" onClick={() => void remove(true)}>
              Delete anyway
            </button>
            <button type="button" class="secondary" onClick={() => setConfirm(null)}>
              Keep it
            </button>
          </div>
        </div>
      )}
      <h2>Spec</h2>
      <pre class="spec" tabIndex={0} aria-label="Agent spec">
        {JSON.stringify(agent, null, 2)}
      </pre>
    </section>
  );
}
