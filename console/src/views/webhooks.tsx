import { useCallback, useEffect, useState } from "preact/hooks";
import { api, request } from "../api";
import { useApp } from "../context";
import { errorText, when } from "../format";
import type { Page } from "../types";

/** /v1/webhooks (docs/webhooks.md): endpoints the stack signs lifecycle events to. */
interface Webhook {
  id: string;
  url: string;
  events: string[] | null;
  description: string | null;
  status: string;
  disabled_reason: string | null;
  created_at: number;
  secret_hint: string;
  secret?: string;
}

interface Delivery {
  id: string;
  event_type: string;
  status: string;
  attempts: unknown[];
  created_at: number;
}

function Deliveries(props: { webhook: Webhook }) {
  const [rows, setRows] = useState<Delivery[] | null>(null);
  useEffect(() => {
    const load = (): void => {
      api<Page<Delivery>>(`/v1/webhooks/${props.webhook.id}/deliveries?limit=20`)
        .then((p) => setRows(p.data))
        .catch(() => setRows([]));
    };
    load();
    const timer = setInterval(load, 2000); // retries and outcomes land while the list is open
    return () => clearInterval(timer);
  }, [props.webhook.id]);
  if (!rows) return <p role="status">Loading deliveries…</p>;
  if (rows.length === 0) return <p class="hint">No deliveries yet.</p>;
  return (
    <table class="list compact">
      <caption class="visually-hidden">Deliveries to {props.webhook.url}</caption>
      <thead>
        <tr>
          <th scope="col">Event</th>
          <th scope="col">Status</th>
          <th scope="col">Attempts</th>
          <th scope="col">When</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((d) => (
          <tr key={d.id}>
            <td>{d.event_type}</td>
            <td>{d.status}</td>
            <td>{d.attempts.length}</td>
            <td>{when(d.created_at)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function WebhooksView() {
  const { me } = useApp();
  const [hooks, setHooks] = useState<Webhook[] | null>(null);
  const [url, setUrl] = useState("");
  const [description, setDescription] = useState("");
  const [created, setCreated] = useState<Webhook | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(async (): Promise<void> => {
    try {
      setHooks((await api<Page<Webhook>>("/v1/webhooks")).data);
    } catch (e) {
      setError(errorText(e));
    }
  }, []);
  useEffect(() => void load(), [load]);

  const create = async (): Promise<void> => {
    try {
      const body = { url: url.trim(), ...(description.trim() ? { description: description.trim() } : {}) };
      setCreated(await api<Webhook>("/v1/webhooks", { method: "POST", json: body }));
      setUrl("");
      setDescription("");
      setError(null);
      await load();
    } catch (e) {
      setError(errorText(e));
    }
  };
  const act = async (hook: Webhook, path: string, method: string, done: string): Promise<void> => {
    try {
      await request(`/v1/webhooks/${hook.id}${path}`, { method });
      setNotice(done);
      await load();
    } catch (e) {
      setError(errorText(e));
    }
  };

  return (
    <section>
      <h1>Webhooks</h1>
      <p class="hint">Endpoints the stack signs session lifecycle events to (docs/webhooks.md).</p>
      {me.can_write && (
        <form
          class="filters"
          aria-label="New webhook"
          onSubmit={(event) => {
            event.preventDefault();
            void create();
          }}
        >
          <div>
            <label htmlFor="wh-url">Endpoint URL</label>
            <input id="wh-url" type="url" required value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
          </div>
          <div>
            <label htmlFor="wh-description">Description</label>
            <input id="wh-description" value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
          </div>
          <button type="submit">Add webhook</button>
        </form>
      )}
      {created?.secret && (
        <div class="panel" role="status">
          Signing secret for {created.url} (shown once): <code data-testid="webhook-secret">{created.secret}</code>
        </div>
      )}
      {notice && <p role="status">{notice}</p>}
      {error && <p role="alert">{error}</p>}
      {hooks && hooks.length === 0 && <p class="empty">No webhooks.</p>}
      {hooks && hooks.length > 0 && (
        <table class="list">
          <caption class="visually-hidden">Webhooks</caption>
          <thead>
            <tr>
              <th scope="col">URL</th>
              <th scope="col">Events</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {hooks.map((hook) => (
              <tr key={hook.id}>
                <td>
                  {hook.url}
                  {hook.description && <div class="hint">{hook.description}</div>}
                  {open === hook.id && <Deliveries webhook={hook} />}
                </td>
                <td>{hook.events?.length ? hook.events.join(", ") : "all"}</td>
                <td>
                  {hook.status}
                  {hook.disabled_reason && <div class="hint">{hook.disabled_reason}</div>}
                </td>
                <td>{when(hook.created_at)}</td>
                <td>
                  <button
                    type="button"
                    class="link"
                    aria-expanded={open === hook.id}
                    aria-label={`Deliveries to ${hook.url}`}
                    onClick={() => setOpen(open === hook.id ? null : hook.id)}
                  >
                    Deliveries
                  </button>
                  {me.can_write && (
                    <>
                      <button
                        type="button"
                        class="link"
                        aria-label={`Send a test event to ${hook.url}`}
                        onClick={() => void act(hook, "/test", "POST", `Test event sent to ${hook.url}.`)}
                      >
                        Test
                      </button>
                      <button
                        type="button"
                        class="link"
                        aria-label={`Delete webhook ${hook.url}`}
                        onClick={() => void act(hook, "", "DELETE", `Deleted ${hook.url}.`)}
                      >
                        Delete
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
