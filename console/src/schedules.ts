// Scheduled tasks (docs/schedules.md): an RRULE said in words where it is a common one, times in
// the task's own zone, the create form's body, and run-now's refusals as sentences.

import { ApiError } from "./api";
import { when } from "./format";

const DAYS: Record<string, string> = {
  MO: "Monday",
  TU: "Tuesday",
  WE: "Wednesday",
  TH: "Thursday",
  FR: "Friday",
  SA: "Saturday",
  SU: "Sunday",
};
const ORDINALS: Record<string, string> = { "1": "first", "2": "second", "3": "third", "4": "fourth", "-1": "last" };
const WEEKDAYS = "MO,TU,WE,TH,FR";
const MAX_TIMES = 6;

function list(words: string[]): string {
  return words.length < 2 ? (words[0] ?? "") : `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}

function numbers(value: string | undefined, fallback: number, max: number): number[] | null {
  if (value === undefined) return [fallback];
  const out = value.split(",").map((v) => (/^\d{1,2}$/.test(v) ? Number(v) : NaN));
  return out.every((n) => n <= max) ? out : null; // NaN fails the comparison too
}

const pad = (n: number): string => String(n).padStart(2, "0");

/** Every time of day the rule names (the rule is anchored at midnight: no BYHOUR is 00, no BYMINUTE :00). */
function times(parts: Map<string, string>): string | null {
  const hours = numbers(parts.get("BYHOUR"), 0, 23);
  const minutes = numbers(parts.get("BYMINUTE"), 0, 59);
  if (!hours || !minutes || hours.length * minutes.length > MAX_TIMES) return null;
  const all = hours.flatMap((h) => minutes.map((m) => h * 60 + m)).sort((a, b) => a - b);
  return `at ${list(all.map((t) => `${pad(Math.floor(t / 60))}:${pad(t % 60)}`))}`;
}

function every(interval: number, one: string, many: string): string {
  return interval === 1 ? `Every ${one}` : `Every ${interval} ${many}`;
}

/**
 * The rule in words ("Every weekday at 09:00"), or null where it is not one of the common shapes
 * (the caller then shows the RRULE itself). Never claims more than the rule says: any part it does
 * not read (COUNT, UNTIL, BYSETPOS, BYMONTH...) makes it give up.
 */
export function describeRule(rrule: string): string | null {
  const parts = new Map<string, string>();
  for (const piece of rrule.trim().replace(/^RRULE:/i, "").split(";")) {
    const [key, value, ...rest] = piece.split("=");
    if (!key || value === undefined || value === "" || rest.length > 0) return null;
    parts.set(key.trim().toUpperCase(), value.trim().toUpperCase());
  }
  const freq = parts.get("FREQ");
  const intervalText = parts.get("INTERVAL") ?? "1";
  if (!/^[1-9]\d{0,3}$/.test(intervalText)) return null;
  const interval = Number(intervalText);
  if ((parts.get("BYSECOND") ?? "0") !== "0") return null;
  const known = new Set(["FREQ", "INTERVAL", "BYSECOND", "WKST", "BYHOUR", "BYMINUTE", "BYDAY", "BYMONTHDAY"]);
  if ([...parts.keys()].some((k) => !known.has(k))) return null;
  const has = (...names: string[]): boolean => names.some((n) => parts.has(n));

  if (freq === "MINUTELY") {
    return has("BYHOUR", "BYMINUTE", "BYDAY", "BYMONTHDAY") ? null : every(interval, "minute", "minutes");
  }
  if (freq === "HOURLY") {
    if (has("BYHOUR", "BYDAY", "BYMONTHDAY")) return null;
    const minutes = numbers(parts.get("BYMINUTE"), 0, 59);
    if (!minutes || minutes.length !== 1) return null;
    return `${every(interval, "hour", "hours")} at :${pad(minutes[0] ?? 0)}`;
  }
  const at = times(parts);
  if (!at) return null;
  if (freq === "DAILY") {
    return has("BYDAY", "BYMONTHDAY") ? null : `${every(interval, "day", "days")} ${at}`;
  }
  if (freq === "WEEKLY") {
    const days = parts.get("BYDAY");
    if (!days || has("BYMONTHDAY")) return null;
    const codes = days.split(",");
    if (codes.some((c) => !(c in DAYS)) || new Set(codes).size !== codes.length) return null;
    const order = Object.keys(DAYS);
    const sorted = [...codes].sort((a, b) => order.indexOf(a) - order.indexOf(b));
    if (interval === 1 && sorted.join(",") === WEEKDAYS) return `Every weekday ${at}`;
    if (interval === 1 && sorted.length === 7) return `Every day ${at}`;
    const names = list(sorted.map((c) => DAYS[c] ?? c));
    return interval === 1 ? `Every ${names} ${at}` : `Every ${interval} weeks on ${names} ${at}`;
  }
  if (freq === "MONTHLY") {
    const months = interval === 1 ? "Monthly" : `Every ${interval} months`;
    const day = parts.get("BYDAY");
    const monthDay = parts.get("BYMONTHDAY");
    if (day && !monthDay) {
      const match = /^(-1|[1-4])(MO|TU|WE|TH|FR|SA|SU)$/.exec(day);
      return match ? `${months} on the ${ORDINALS[match[1] ?? ""]} ${DAYS[match[2] ?? ""]} ${at}` : null;
    }
    if (monthDay && !day) {
      if (monthDay === "-1") return `${months} on the last day ${at}`;
      const dates = numbers(monthDay, 1, 31);
      return dates && dates.every((d) => d >= 1) ? `${months} on day ${list(dates.map(String))} ${at}` : null;
    }
    return null;
  }
  return null;
}

/** An instant (ISO 8601, or epoch seconds) on the wall clock of ``timeZone``, the task's: "Mar 28, 2027, 9:00 AM". */
export function whenIn(instant: string | number | null | undefined, timeZone: string): string {
  if (instant === null || instant === undefined || instant === "") return "";
  const date = new Date(typeof instant === "number" ? instant * 1000 : instant);
  if (Number.isNaN(date.getTime())) return String(instant);
  try {
    return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short", timeZone });
  } catch {
    return when(date.getTime() / 1000); // a zone this browser does not know: its own clock
  }
}

/** The browser's own zone, the form's default. */
export function localZone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch {
    return "UTC";
  }
}

export interface TaskForm {
  name: string;
  agent_id: string;
  prompt: string;
  rrule: string;
  timezone: string;
  max_cost_usd: string;
}

export interface TaskBody {
  name: string;
  agent_id: string;
  prompt: string;
  rrule: string;
  timezone: string;
  max_cost_usd?: number;
}

/** The create body, or a sentence naming what is missing (the server checks the rule and zone). */
export function taskBody(form: TaskForm): TaskBody | string {
  const name = form.name.trim();
  const prompt = form.prompt.trim();
  const rrule = form.rrule.trim().replace(/^RRULE:/i, "");
  if (!name) return "Give the task a name.";
  if (!form.agent_id) return "Choose an agent.";
  if (!prompt) return "Write the prompt the agent runs.";
  if (!rrule) return "Give a rule (an RRULE such as FREQ=DAILY;BYHOUR=9;BYMINUTE=0).";
  const body: TaskBody = { name, agent_id: form.agent_id, prompt, rrule, timezone: form.timezone.trim() || "UTC" };
  const cap = form.max_cost_usd.trim();
  if (cap) {
    const value = Number(cap);
    if (!Number.isFinite(value) || value <= 0) return "The maximum cost is a number of US dollars above 0.";
    body.max_cost_usd = value;
  }
  return body;
}

/** Why run now did not start a run, as a sentence (409: a run is still running; 429: a quota). */
export function runNowError(error: unknown, taskName: string): string {
  if (error instanceof ApiError && error.status === 409) {
    return `${taskName} is already running: run it again once its current run has finished.`;
  }
  if (error instanceof ApiError && error.status === 429) return `${taskName} did not run: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
