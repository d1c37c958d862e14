import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api, request } from "../api";
import { useApp } from "../context";
import { errorText } from "../format";
import { onLinkClick } from "../router";
import { describeRule, localZone, runNowError, taskBody, whenIn, type TaskForm } from "../schedules";
import type { Agent, Page, RunStarted, ScheduledRun, ScheduledTask } from "../types";
import { formatCost } from "../usage";

const COLUMNS = 8;
const EMPTY: TaskForm = {
  name: "",
  agent_id: "",
  prompt: "",
  rrule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=0",
  timezone: "",
  max_cost_usd: "",
};

function zones(): string[] {
  try {
    return Intl.supportedValuesOf("timeZone");
  } catch {
    return [];
  }
}

function SessionLink(props: { id: string | null; label: string }) {
  if (!props.id) return null;
  return (
    <a href={`/sessions/${props.id}`} onClick={onLinkClick} aria-label={props.label}>
      Session
    </a>
  );
}

function Runs(props: { task: ScheduledTask }) {
  const [runs, setRuns] = useState<ScheduledRun[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const { id, name, timezone } = props.task;
  useEffect(() => {
    const load = (): void => {
      api<{ runs: ScheduledRun[] }>(`/v1/scheduled-tasks/${id}/runs?limit=20`)
        .then((r) => {
          setRuns(r.runs);
          setError(null);
        })
        .catch((e: unknown) => setError(errorText(e)));
    };
    load();
    const timer = setInterval(load, 2000); // a run's outcome lands while the history is open
    return () => clearInterval(timer);
  }, [id]);
  if (error) return <p role="alert">{error}</p>;
  if (!runs) return <p role="status">Loading runs…</p>;
  if (runs.length === 0) return <p class="hint">No runs yet.</p>;
  return (
    <table class="list compact runs">
      <caption class="visually-hidden">Runs of {name}</caption>
      <thead>
        <tr>
          <th scope="col">Status</th>
          <th scope="col">Scheduled</th>
          <th scope="col">Fired</th>
          <th scope="col">Finished</th>
          <th scope="col">Cost</th>
          <th scope="col">Session</th>
        </tr>
      </thead>
      <tbody>
        {runs.map((run) => (
          <tr key={run.id}>
            <td>
              <span class={`status ${run.status}`}>{run.status}</span>
              {run.trigger !== "schedule" && (
                <span class="label">{run.trigger === "manual" ? "run now" : "catch-up"}</span>
              )}
              {run.error_code && (
                <div class="hint" title={run.error ?? undefined}>
                  {run.error_code}
                </div>
              )}
            </td>
            <td>{whenIn(run.scheduled_at, timezone)}</td>
            <td>{whenIn(run.fired_at, timezone)}</td>
            <td>{whenIn(run.finished_at, timezone)}</td>
            <td>{formatCost(run.cost_usd)}</td>
            <td>
              <SessionLink
                id={run.conversation_id}
                label={`Session of the ${run.status} run scheduled ${whenIn(run.scheduled_at, timezone)}`}
              />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function SchedulesView() {
  const { me } = useApp();
  const [tasks, setTasks] = useState<ScheduledTask[] | null>(null);
  const [agents, setAgents] = useState<Agent[]>([]);
  const [form, setForm] = useState<TaskForm>(() => ({ ...EMPTY, timezone: localZone() }));
  const [open, setOpen] = useState<string | null>(null);
  const [confirm, setConfirm] = useState<ScheduledTask | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const confirmButton = useRef<HTMLButtonElement>(null);
  const opener = useRef<HTMLElement | null>(null); // the Delete button the confirmation came from

  const load = useCallback(async (): Promise<void> => {
    try {
      setTasks((await api<{ scheduled_tasks: ScheduledTask[] }>("/v1/scheduled-tasks")).scheduled_tasks);
    } catch (e) {
      setError(errorText(e));
    }
  }, []);
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
        setForm((f) => (f.agent_id ? f : { ...f, agent_id: p.data[0]?.id ?? "" }));
      })
      .catch(() => undefined);
  }, []);
  useEffect(() => confirmButton.current?.focus(), [confirm]);

  const agentName = (id: string): string => agents.find((a) => a.id === id)?.name ?? id;
  const set = (key: keyof TaskForm) => (event: Event) =>
    setForm({ ...form, [key]: (event.currentTarget as HTMLInputElement).value });
  const done = async (message: string): Promise<void> => {
    setNotice(message);
    setError(null);
    await load();
  };
  const fail = (message: string): void => {
    setNotice(null);
    setError(message);
  };

  const create = async (): Promise<void> => {
    const body = taskBody(form);
    if (typeof body === "string") {
      fail(body);
      return;
    }
    try {
      const task = await api<ScheduledTask>("/v1/scheduled-tasks", { method: "POST", json: body });
      setForm({ ...EMPTY, agent_id: form.agent_id, timezone: form.timezone });
      await done(`Created ${task.name}.`);
    } catch (e) {
      fail(errorText(e));
    }
  };
  const setState = async (task: ScheduledTask, state: "active" | "paused"): Promise<void> => {
    try {
      await api<ScheduledTask>(`/v1/scheduled-tasks/${task.id}`, { method: "PATCH", json: { state } });
      await done(state === "paused" ? `Paused ${task.name}.` : `Resumed ${task.name}.`);
    } catch (e) {
      fail(errorText(e));
    }
  };
  const runNow = async (task: ScheduledTask): Promise<void> => {
    try {
      await api<RunStarted>(`/v1/scheduled-tasks/${task.id}/run`, { method: "POST" });
      setOpen(task.id); // its history shows the run and, once it has one, its session
      await done(`Started a run of ${task.name}.`);
    } catch (e) {
      fail(runNowError(e, task.name));
    }
  };
  const remove = async (task: ScheduledTask): Promise<void> => {
    setConfirm(null);
    try {
      await request(`/v1/scheduled-tasks/${task.id}`, { method: "DELETE" });
      if (open === task.id) setOpen(null);
      await done(`Deleted ${task.name}.`);
    } catch (e) {
      fail(errorText(e));
    }
  };

  const words = describeRule(form.rrule);
  const zoneNames = useMemo(zones, []);
  return (
    <section>
      <h1>Schedules</h1>
      <p class="hint">
        Scheduled tasks: an agent runs a prompt at each occurrence of a rule, in a time zone (docs/schedules.md).
      </p>
      {me.can_write && (
        <form
          class="filters task-form"
          aria-label="New scheduled task"
          onSubmit={(event) => {
            event.preventDefault();
            void create();
          }}
        >
          <div>
            <label htmlFor="st-name">Name</label>
            <input id="st-name" required value={form.name} onInput={set("name")} />
          </div>
          <div>
            <label htmlFor="st-agent">Agent</label>
            <select id="st-agent" required value={form.agent_id} onChange={set("agent_id")}>
              {agents.map((a) => (
                <option key={a.id} value={a.id}>
                  {a.name}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label htmlFor="st-rrule">Rule (RRULE)</label>
            <input
              id="st-rrule"
              required
              class="mono"
              size={34}
              value={form.rrule}
              onInput={set("rrule")}
              aria-describedby="st-rrule-words"
            />
            <span id="st-rrule-words" class="hint">
              {words ?? "A rule the server reads (RFC 5545)"}
            </span>
          </div>
          <div>
            <label htmlFor="st-zone">Time zone</label>
            <input id="st-zone" required list="st-zones" value={form.timezone} onInput={set("timezone")} />
            <datalist id="st-zones">
              {zoneNames.map((z) => (
                <option key={z} value={z} />
              ))}
            </datalist>
          </div>
          <div>
            <label htmlFor="st-cost">Max cost per run (USD)</label>
            <input
              id="st-cost"
              type="number"
              min="0.01"
              step="0.01"
              inputMode="decimal"
              value={form.max_cost_usd}
              onInput={set("max_cost_usd")}
            />
          </div>
          <div class="wide">
            <label htmlFor="st-prompt">Prompt</label>
            <textarea id="st-prompt" required rows={2} value={form.prompt} onInput={set("prompt")} />
          </div>
          <button type="submit">Create task</button>
        </form>
      )}
      {notice && <p role="status">{notice}</p>}
      {error && <p role="alert">{error}</p>}
      {confirm && (
        <div role="alertdialog" aria-labelledby="st-confirm-h" aria-describedby="st-confirm-p" class="panel">
          <h2 id="st-confirm-h">Delete {confirm.name}?</h2>
          <p id="st-confirm-p">Its schedule and run history go; the sessions its runs opened stay.</p>
          <div class="row">
            <button type="button" class="danger" ref={confirmButton} onClick={() => void remove(confirm)}>
              Delete task
            </button>
            <button
              type="button"
              class="secondary"
              onClick={() => {
                setConfirm(null);
                opener.current?.focus(); // back where the keyboard was
              }}
            >
              Keep it
            </button>
          </div>
        </div>
      )}
      {tasks && tasks.length === 0 && <p class="empty">No scheduled tasks.</p>}
      {tasks && tasks.length > 0 && (
        <table class="list">
          <caption class="visually-hidden">Scheduled tasks</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Agent</th>
              <th scope="col">Rule</th>
              <th scope="col">Time zone</th>
              <th scope="col">State</th>
              <th scope="col">Next run</th>
              <th scope="col">Last run</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {tasks.map((task) => {
              const rule = describeRule(task.rrule);
              return [
                <tr key={task.id}>
                  <td class="name">
                    {task.name}
                    {task.max_cost_usd !== null && (
                      <div class="hint">at most {formatCost(task.max_cost_usd)} a run</div>
                    )}
                  </td>
                  <td>{agentName(task.agent_id)}</td>
                  <td class="rule" title={task.rrule}>
                    {rule ?? <code>{task.rrule}</code>}
                  </td>
                  <td>{task.timezone}</td>
                  <td>
                    <span class={`status ${task.state}`}>{task.state}</span>
                  </td>
                  <td class="nowrap" data-testid="next-run">
                    {task.next_run_at ? whenIn(task.next_run_at, task.timezone) : "—"}
                  </td>
                  <td>
                    {task.last_run_status ? (
                      <>
                        <span class={`status ${task.last_run_status}`}>{task.last_run_status}</span>{" "}
                        <SessionLink
                          id={task.last_run_conversation_id}
                          label={`Session of the last run of ${task.name}`}
                        />
                        <div class="hint">{whenIn(task.last_run_at, task.timezone)}</div>
                      </>
                    ) : (
                      "never"
                    )}
                  </td>
                  <td class="nowrap">
                    <button
                      type="button"
                      class="link"
                      aria-expanded={open === task.id}
                      aria-label={`Runs of ${task.name}`}
                      onClick={() => setOpen(open === task.id ? null : task.id)}
                    >
                      Runs
                    </button>
                    {me.can_write && (
                      <>
                        <button
                          type="button"
                          class="link"
                          aria-label={`Run now: ${task.name}`}
                          onClick={() => void runNow(task)}
                        >
                          Run now
                        </button>
                        {task.state === "active" ? (
                          <button
                            type="button"
                            class="link"
                            aria-label={`Pause ${task.name}`}
                            onClick={() => void setState(task, "paused")}
                          >
                            Pause
                          </button>
                        ) : (
                          <button
                            type="button"
                            class="link"
                            aria-label={`Resume ${task.name}`}
                            onClick={() => void setState(task, "active")}
                          >
                            Resume
                          </button>
                        )}
                        <button
                          type="button"
                          class="link"
                          aria-label={`Delete ${task.name}`}
                          onClick={(event) => {
                            opener.current = event.currentTarget;
                            setConfirm(task);
                          }}
                        >
                          Delete
                        </button>
                      </>
                    )}
                  </td>
                </tr>,
                open === task.id && (
                  <tr key={`${task.id}-runs`} class="runs-row">
                    <td colSpan={COLUMNS}>
                      <Runs task={task} />
                    </td>
                  </tr>
                ),
              ];
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}
