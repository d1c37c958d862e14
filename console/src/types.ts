// The API's shapes as the console reads them (README "API"; /openapi.json has the full document).

export type SessionStatus = "idle" | "running" | "failed";

export interface Page<T> {
  object: "list";
  data: T[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export interface SessionRow {
  id: string;
  agent_id: string;
  agent_name: string;
  status: SessionStatus;
  created_at: number;
  updated_at: number;
  title: string | null;
  labels: Record<string, string>;
  owner: string;
  archived: boolean;
  parent_session_id: string | null;
  pending_elicitations_count: number;
  pending_client_calls: number;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
}

/** The hosted workspace's lifecycle as `session.environment` events tell it (docs/environments.md). */
export interface EnvironmentState {
  /** pending, ready, failed or suspended (a later server may add others: shown as they are). */
  status: string;
  /** A workspace brought back from its snapshot (cloud) rather than made. */
  restored: boolean;
  /** Why the setup failed (`failed` only). */
  error: string | null;
}

export interface WaitingCall {
  call_id: string;
  name: string;
  arguments: string;
  response_id: string;
  kind: "client" | "approval";
  elicitation_id: string | null;
}

export interface TextBlock {
  type: string;
  text?: string;
}

export interface Item {
  id: string;
  type: string; // "message" | "function_call" | "function_call_output"
  response_id?: string | null;
  created_at?: number;
  role?: string;
  content?: TextBlock[] | string;
  call_id?: string;
  name?: string;
  arguments?: string;
  output?: string;
  status?: string;
  details?: ToolDetails | null; // a server call's output: what ran
}

/** A server call's `details` (docs/environments.md): a hosted command's exit code and time, or a file tool's path. */
export interface ToolDetails {
  kind?: string;
  command?: string;
  exit_code?: number | null;
  duration_ms?: number;
  timed_out?: boolean;
  path?: string;
  output_file_id?: string;
}

export interface Snapshot extends SessionRow {
  object: "session";
  items: Item[];
  has_more_items?: boolean;
  last_event_id: number;
  active_response_id: string | null;
  last_task_error: { code: string; message: string } | null;
  usage: Usage;
  llm_model: string | null;
  waiting: WaitingCall[];
}

export interface TurnUsage extends Usage {
  response_id: string;
  created_at: number;
  cost_usd: number | null;
}

/** GET /v1/sessions/{id}/usage: the server prices tokens (null without a price for the model). */
export interface UsageReport {
  session_id: string;
  model: string | null;
  price: { input: number; output: number } | null;
  usage: Usage;
  cost_usd: number | null;
  turns: TurnUsage[];
}

export interface AgentTool {
  name: string;
  runtime?: string;
  type?: string;
  description?: string;
}

export interface Agent {
  id: string;
  name: string;
  version?: number;
  created_at: number;
  owner?: string;
  spec?: Record<string, unknown>;
  tools?: AgentTool[];
  [key: string]: unknown;
}

/** One entry of GET /v1/sessions/{id}/workspace (a file, an empty directory, or a symbolic link). */
export interface WorkspaceEntry {
  path: string; // absolute: /workspace/...
  type: string; // "file" | "directory" | "symlink"
  bytes: number;
  modified_at: number;
}

export interface WorkspaceListing {
  object: "list";
  root: string;
  data: WorkspaceEntry[];
  total_bytes: number;
}

export interface FileResource {
  id: string;
  name: string;
  metadata: { filename: string; bytes: number; content_type: string; created_at: number };
}

export interface ConsoleConfig {
  auth_required: boolean;
  oidc: { issuer: string; client_id: string; scopes: string } | null;
}

export interface ServerInfo {
  server: string;
  server_version: string;
  console?: ConsoleConfig;
  live?: { url?: string } | null;
}

export interface Me {
  principal: string;
  scopes: string[];
  admin: boolean;
  can_write: boolean;
  via: string;
}

/** One event of a session's stream: ``id`` is the SSE id (the per-session seq), null for heartbeats. */
export interface StreamEvent {
  id: number | null;
  type: string;
  data: Record<string, unknown>;
}

export type TaskState = "active" | "paused";
export type RunStatus = "scheduled" | "running" | "succeeded" | "failed" | "skipped" | "missed";

/** /v1/scheduled-tasks (docs/schedules.md): ``next_run_at`` is ISO 8601 in the task's zone, null while paused. */
export interface ScheduledTask {
  id: string;
  name: string;
  prompt: string;
  rrule: string;
  agent_id: string;
  timezone: string;
  state: TaskState;
  created_at: number;
  updated_at: number | null;
  max_cost_usd: number | null;
  overlap: "skip" | "allow";
  next_run_at: string | null;
  last_run_at: number | null;
  last_run_status: RunStatus | null;
  last_run_id: string | null;
  last_run_conversation_id: string | null;
}

export interface ScheduledRun {
  id: string;
  scheduled_task_id: string;
  status: RunStatus;
  trigger: "schedule" | "manual" | "catch_up";
  scheduled_at: number;
  fired_at: number | null;
  finished_at: number | null;
  conversation_id: string | null;
  error_code: string | null;
  error: string | null;
  cost_usd: number | null;
}

/** POST /v1/scheduled-tasks/{id}/run (202). */
export interface RunStarted {
  triggered: boolean;
  id: string;
  run_id: string;
  status: RunStatus;
  conversation_id: string | null;
}
