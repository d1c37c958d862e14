"""An in-memory :class:`~skyloop.store.Store`: the same contract as the table, for fast unit tests.

It keeps records as models behind one lock, so every operation is atomic the
way one DynamoDB request (or transaction) is. The contract suite
(``tests/integration/test_store_contract.py``) runs against this store and
against :class:`~skyloop.store.DynamoStore` on moto, so the two cannot drift.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from skyloop.errors import ConflictError, InvalidInputError, NotFoundError
from skyloop.models.session import (
    ConversationItem,
    PendingCall,
    Session,
    SessionFile,
    TaskError,
    Turn,
    turn_order,
)
from skyloop.store import keys, notifier
from skyloop.store.records import AppendResult, ConditionFailedError, StoredEvent, TokenRecord, TurnDecision

if TYPE_CHECKING:
    from collections.abc import Sequence

    from skyloop.models.agent import Agent
    from skyloop.models.schedule import ScheduledRun, ScheduledTask
    from skyloop.store.records import Append, FileLimits, Guard


@dataclass
class _SessionData:
    session: Session
    created: tuple[int, str]
    events: list[tuple[StoredEvent, int]] = field(default_factory=list)  # (event, expires_at)
    items: dict[tuple[int, int, int], ConversationItem] = field(default_factory=dict)
    dedupe: dict[str, int] = field(default_factory=dict)  # key -> expires_at
    turns: dict[str, Turn] = field(default_factory=dict)
    decisions: dict[str, TurnDecision] = field(default_factory=dict)
    resumed: dict[str, int] = field(default_factory=dict)
    calls: dict[tuple[str, str], PendingCall] = field(default_factory=dict)
    files: dict[str, tuple[SessionFile, bytes]] = field(default_factory=dict)


class MemoryStore:
    """See the module docstring; ``event_ttl_s`` is honoured by reads and :meth:`sweep_expired`."""

    def __init__(self, *, event_ttl_s: int = 24 * 3600) -> None:
        self.event_ttl_s = event_ttl_s
        self._lock = threading.RLock()
        self._agents: dict[str, tuple[Agent, tuple[int, str]]] = {}
        self._sessions: dict[str, _SessionData] = {}
        self._tokens: dict[str, TokenRecord] = {}
        self._quota: dict[tuple[str, str], int] = {}
        self._tool_listings: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._tasks: dict[str, tuple[ScheduledTask, tuple[int, str]]] = {}
        self._runs: dict[str, dict[str, ScheduledRun]] = {}
        self._clock = itertools.count()
        self.appends = 0  # how many appends landed (tests read it)

    def _created(self, ident: str) -> tuple[int, str]:
        return (time.time_ns() * 1000 + next(self._clock) % 1000, ident)

    # ------------------------------------------------------------------ agents
    def put_agent(self, agent: Agent) -> None:
        if agent.spec.executor.auth and agent.spec.executor.auth.api_key is not None:
            raise ValueError("agent keys go to the secret store, not the table (see skyloop.secrets)")
        with self._lock:
            if agent.id in self._agents:
                raise ConflictError(f"an agent with id {agent.id!r} already exists")
            self._agents[agent.id] = (agent.model_copy(deep=True), self._created(agent.id))

    def get_tool_listing(self, agent_id: str, server: str) -> list[dict[str, Any]] | None:
        with self._lock:
            listing = self._tool_listings.get((agent_id, server))
            return copy.deepcopy(listing) if listing is not None else None

    def put_tool_listing(self, agent_id: str, server: str, tools: list[dict[str, Any]]) -> None:
        with self._lock:
            self._tool_listings.setdefault((agent_id, server), copy.deepcopy(tools))

    def get_agent(self, agent_id: str) -> Agent:
        with self._lock:
            if agent_id not in self._agents:
                raise NotFoundError(f"Agent not found: '{agent_id}'")
            return self._agents[agent_id][0].model_copy(deep=True)

    def archive_agent(self, agent_id: str, at: int) -> Agent:
        with self._lock:
            if agent_id not in self._agents:
                raise NotFoundError(f"Agent not found: '{agent_id}'")
            agent, created = self._agents[agent_id]
            if agent.archived_at is None:
                self._agents[agent_id] = (agent.model_copy(update={"archived_at": at}), created)
            return self._agents[agent_id][0].model_copy(deep=True)

    def delete_agent(self, agent_id: str) -> None:
        with self._lock:
            self._agents.pop(agent_id, None)
            for key in [k for k in self._tool_listings if k[0] == agent_id]:
                del self._tool_listings[key]

    def find_agent_by_name(self, name: str, *, owner: str = keys.DEFAULT_OWNER) -> Agent | None:
        with self._lock:
            found = [(c, a) for a, c in self._agents.values() if a.name == name and a.owner == owner]
            return max(found, key=lambda pair: pair[0])[1].model_copy(deep=True) if found else None

    def list_agents(
        self,
        *,
        owner: str = keys.DEFAULT_OWNER,
        limit: int = 20,
        descending: bool = True,
        after: str | None = None,
    ) -> tuple[list[Agent], bool]:
        with self._lock:
            rows = sorted(
                ((c, a) for a, c in self._agents.values() if a.owner == owner),
                key=lambda pair: pair[0],
                reverse=descending,
            )
            if after:
                if after not in self._agents or self._agents[after][0].owner != owner:
                    raise NotFoundError(f"Agent not found: '{after}'")
                start = self._agents[after][1]
                rows = [(c, a) for c, a in rows if (c < start if descending else c > start)]
            page = [a.model_copy(deep=True) for _, a in rows[:limit]]
            return page, len(rows) > limit

    # ---------------------------------------------------------------- sessions
    def create_session(self, session: Session, items: Sequence[ConversationItem] = ()) -> None:
        with self._lock:
            if session.id in self._sessions:
                raise ConflictError(f"a session with id {session.id!r} already exists")
            if items:
                session = session.model_copy(update={"last_seq": max(session.last_seq, len(items))})
            data = _SessionData(session.model_copy(deep=True), self._created(session.id))
            for position, item in enumerate(items, start=1):
                data.items[(position, position, 0)] = item.model_copy(
                    update={"position": position, "status": "completed"}, deep=True
                )
            self._sessions[session.id] = data

    def list_child_sessions(self, parent_id: str) -> list[Session]:
        with self._lock:
            children = sorted(
                (d for d in self._sessions.values() if d.session.parent_session_id == parent_id),
                key=lambda d: d.created,
            )
            return [d.session.model_copy(deep=True) for d in children]

    def _data(self, session_id: str) -> _SessionData:
        data = self._sessions.get(session_id)
        if data is None:
            raise NotFoundError(f"Session not found: '{session_id}'")
        return data

    def get_session(self, session_id: str) -> Session:
        with self._lock:
            return self._data(session_id).session.model_copy(deep=True)

    def list_sessions(
        self,
        *,
        owner: str = keys.DEFAULT_OWNER,
        agent_name: str | None = None,
        agent_id: str | None = None,
        archived: bool | None = False,
        limit: int = 20,
        descending: bool = True,
        after: str | None = None,
    ) -> tuple[list[Session], bool]:
        with self._lock:

            def in_list(data: _SessionData) -> bool:
                s = data.session
                return s.owner == owner and (agent_name is None or s.agent_name == agent_name)

            rows = sorted(
                (d for d in self._sessions.values() if in_list(d)),
                key=lambda d: d.created,
                reverse=descending,
            )
            if after:
                cursor = self._sessions.get(after)
                if cursor is None:
                    raise NotFoundError(f"Session not found: '{after}'")
                if not in_list(cursor):
                    raise InvalidInputError(f"cursor session '{after}' is not in this list")
                rows = [
                    d
                    for d in rows
                    if (d.created < cursor.created if descending else d.created > cursor.created)
                ]
            rows = [
                d
                for d in rows
                if (agent_id is None or d.session.agent_id == agent_id)
                and (archived is None or d.session.archived == archived)
            ]
            return [d.session.model_copy(deep=True) for d in rows[:limit]], len(rows) > limit

    def list_running_sessions(self) -> list[Session]:
        with self._lock:
            return [
                d.session.model_copy(deep=True)
                for d in self._sessions.values()
                if d.session.status == "running"
            ]

    def update_session(self, session_id: str, changes: dict[str, object]) -> Session:
        with self._lock:
            data = self._data(session_id)
            fields: dict[str, Any] = {}
            for key, value in changes.items():
                default = Session.model_fields[key].get_default(call_default_factory=True)
                fields[key] = default if value is None else copy.deepcopy(value)
            fields["updated_at"] = int(time.time())
            data.session = Session.model_validate({**data.session.model_dump(), **fields})
            return data.session.model_copy(deep=True)

    def delete_session(self, session_id: str) -> None:
        with self._lock:
            self._data(session_id)
            del self._sessions[session_id]

    # --------------------------------------------------------------- event log
    @staticmethod
    def _guard_holds(session: Session, guard: Guard | None) -> bool:
        if guard is None:
            return True
        if guard.running is not None and (session.status == "running") != guard.running:
            return False
        if guard.active_turn is not None and session.active_response_id != guard.active_turn:
            return False
        return guard.input_seen_through is None or session.input_seq <= guard.input_seen_through

    def append(self, batch: Append) -> AppendResult:
        with self._lock:
            data = self._data(batch.session_id)
            now = int(time.time())
            if batch.dedupe_key and batch.dedupe_key in data.dedupe:
                return AppendResult(first_seq=0, last_seq=0, duplicate=True)
            session = data.session
            if not self._guard_holds(session, batch.guard):
                raise ConditionFailedError(
                    f"Session '{batch.session_id}' is not in the state this change requires"
                )
            self._check_records(data, batch)
            result = self._apply(data, batch, now)
        notifier.notify(batch.session_id)
        return result

    def _check_records(self, data: _SessionData, batch: Append) -> None:
        """Every condition the table would check on the transaction's other items."""
        failed = (
            (batch.new_turn is not None and batch.new_turn.response_id in data.turns)
            or any((c.response_id, c.call_id) in data.calls for c in batch.new_calls)
            or (batch.decision is not None and batch.decision.response_id not in data.turns)
            or any(
                (c.response_id, c.call_id) not in data.calls
                or data.calls[(c.response_id, c.call_id)].output is not None
                for c, _ in batch.cancel_calls
            )
            or any(
                (r.call.response_id, r.call.call_id) not in data.calls
                or data.calls[(r.call.response_id, r.call.call_id)].approval != "pending"
                or data.calls[(r.call.response_id, r.call.call_id)].output is not None
                for r in batch.approvals
            )
            or (
                bool(batch.approvals)
                and (
                    batch.approvals[0].call.response_id not in data.turns
                    or data.turns[batch.approvals[0].call.response_id].unanswered < len(batch.approvals)
                )
            )
            or any(claim in data.dedupe for claim in batch.claims)
        )
        if failed:
            raise ConditionFailedError(f"Session '{batch.session_id}' changed under a write")

    @staticmethod
    def _changed_session(session: Session, batch: Append, last: int, now: int) -> Session:
        fields: dict[str, Any] = {"last_seq": last, "updated_at": now}
        change = batch.change
        if change is not None:
            for name, value in (
                ("status", change.status),
                ("active_response_id", change.active_turn),
                ("last_response_id", change.last_response_id),
            ):
                if value is not None:
                    fields[name] = value
            if change.last_task_error:
                fields["last_task_error"] = TaskError.model_validate(change.last_task_error)
            if change.mark_input:
                fields["input_seq"] = last
            if change.end_active_turn:
                fields["active_response_id"] = None
            if change.clear_task_error:
                fields["last_task_error"] = None
        if batch.decision is not None:
            fields["input_tokens"] = session.input_tokens + batch.decision.input_tokens
            fields["output_tokens"] = session.output_tokens + batch.decision.output_tokens
            fields["spend_micros"] = session.spend_micros + batch.decision.cost_micros
        return session.model_copy(update=fields)

    def _apply(self, data: _SessionData, batch: Append, now: int) -> AppendResult:
        session = data.session
        expires = now + self.event_ttl_s
        n = len(batch.events)
        first, last = session.last_seq + 1, session.last_seq + n
        data.session = self._changed_session(session, batch, last, now)
        if batch.dedupe_key:
            data.dedupe[batch.dedupe_key] = expires
        for i, (type_, event_data) in enumerate(batch.events):
            data.events.append((StoredEvent(first + i, type_, copy.deepcopy(event_data), at=now), expires))
        for idx, item in enumerate(batch.items):
            seq = first + (item.event_index if item.event_index >= 0 else n - 1) if n else session.last_seq
            anchor = item.anchor_seq if item.anchor_seq is not None else seq
            data.items[(anchor, seq, idx)] = ConversationItem(
                id=item.id,
                type=item.type,  # type: ignore[arg-type]
                response_id=item.response_id,
                created_at=now,
                position=seq,
                data=copy.deepcopy(item.data),
            )
        self._apply_turn_records(data, batch, now, first)
        for claim in batch.claims:
            data.dedupe[claim] = expires
        self.appends += 1
        return AppendResult(first_seq=first, last_seq=last)

    @staticmethod
    def _apply_turn_records(data: _SessionData, batch: Append, now: int, first_seq: int) -> None:
        if batch.new_turn is not None:
            data.turns[batch.new_turn.response_id] = batch.new_turn.model_copy(
                update={"start_seq": first_seq}, deep=True
            )
        for call in batch.new_calls:
            data.calls[(call.response_id, call.call_id)] = call.model_copy(deep=True)
        if batch.decision is not None:
            decision = batch.decision
            turn = data.turns[decision.response_id]
            data.turns[decision.response_id] = turn.model_copy(
                update={
                    "unanswered": decision.unanswered,
                    "await_iteration": decision.iteration,
                    "input_tokens": turn.input_tokens + decision.input_tokens,
                    "output_tokens": turn.output_tokens + decision.output_tokens,
                    "spend_micros": turn.spend_micros + decision.cost_micros,
                }
            )
            data.decisions[decision.response_id] = (
                decision if decision.decided_at else replace(decision, decided_at=now)
            )
        end = batch.turn_end
        if end is not None and end.response_id in data.turns:
            data.turns[end.response_id] = data.turns[end.response_id].model_copy(
                update={"status": end.status, "completed_at": end.completed_at, "error": end.error}
            )
        for resolution in batch.approvals:
            key = (resolution.call.response_id, resolution.call.call_id)
            update: dict[str, Any] = {
                "approval": "approved" if resolution.approved else "denied",
                "answered_at": now,
            }
            if resolution.output is not None:
                update["output"] = resolution.output
            data.calls[key] = data.calls[key].model_copy(update=update)
        if batch.approvals:
            rid = batch.approvals[0].call.response_id
            turn = data.turns[rid]
            data.turns[rid] = turn.model_copy(update={"unanswered": turn.unanswered - len(batch.approvals)})
        for call, output in batch.cancel_calls:
            key = (call.response_id, call.call_id)
            data.calls[key] = data.calls[key].model_copy(
                update={"output": output, "cancelled": True, "answered_at": now}
            )

    def read_event_page(
        self, session_id: str, after: int, *, limit: int = 500
    ) -> tuple[list[StoredEvent], int, bool]:
        with self._lock:
            data = self._sessions.get(session_id)
            rows = [(e, x) for e, x in (data.events if data else []) if e.seq > after][:limit]
        now = int(time.time())
        covered = rows[-1][0].seq if rows else after
        events = [StoredEvent(e.seq, e.type, copy.deepcopy(e.data), at=e.at) for e, x in rows if x >= now]
        return events, covered, len(rows) >= limit

    def dedupe_exists(self, session_id: str, key: str) -> bool:
        with self._lock:
            data = self._sessions.get(session_id)
            return data is not None and key in data.dedupe

    def claim(self, session_id: str, key: str) -> bool:
        with self._lock:
            data = self._data(session_id)
            if key in data.dedupe:
                return False
            data.dedupe[key] = int(time.time()) + self.event_ttl_s
            return True

    def list_items(
        self,
        session_id: str,
        *,
        through_seq: int | None = None,
        newest: int | None = None,
        for_turn: bool = False,  # noqa: ARG002  (a read of this store costs no request)
        pending_anchor: int | None = None,  # noqa: ARG002
    ) -> list[ConversationItem]:
        with self._lock:
            data = self._sessions.get(session_id)
            if data is None:
                return []
            found = [
                item.model_copy(deep=True)
                for _, item in sorted(data.items.items())
                if through_seq is None or item.position <= through_seq
            ]
            return found if newest is None else found[max(0, len(found) - newest) :]

    # ----------------------------------------------------------- turns, calls
    def _turn(self, data: _SessionData, response_id: str) -> Turn:
        turn = data.turns.get(response_id)
        if turn is None:
            raise NotFoundError(f"Turn not found: '{response_id}'")
        return turn

    def get_turn(self, session_id: str, response_id: str) -> Turn:
        with self._lock:
            data = self._sessions.get(session_id)
            if data is None:
                raise NotFoundError(f"Turn not found: '{response_id}'")
            turn = self._turn(data, response_id)
            resumed = data.resumed.get(response_id)
            decision = data.decisions.get(response_id)
            decided = decision.iteration if decision else None
            return turn.model_copy(
                update={"resumed_iteration": resumed, "decided_iteration": decided}, deep=True
            )

    def list_turns(self, session_id: str) -> list[Turn]:
        with self._lock:
            data = self._sessions.get(session_id)
            turns = list(data.turns.values()) if data else []
            out = [
                t.model_copy(update={"tools": [], "task_token": None}, deep=True)
                for t in sorted(turns, key=turn_order)
            ]
        return [self.get_turn(session_id, t.response_id).model_copy(update={"tools": []}) for t in out]

    def get_decision(self, session_id: str, response_id: str) -> TurnDecision | None:
        with self._lock:
            data = self._sessions.get(session_id)
            return data.decisions.get(response_id) if data else None

    def park_turn(self, session_id: str, response_id: str, *, task_token: str, iteration: int) -> None:
        with self._lock:
            data = self._sessions.get(session_id)
            if data is None:
                raise NotFoundError(f"Turn not found: '{response_id}'")
            turn = self._turn(data, response_id)
            data.turns[response_id] = turn.model_copy(
                update={"task_token": task_token, "await_iteration": iteration}
            )

    def claim_resume(self, session_id: str, response_id: str, iteration: int) -> bool:
        with self._lock:
            data = self._sessions.get(session_id)
            if data is None or response_id not in data.turns:
                return False
            current = data.resumed.get(response_id)
            if current is not None and current >= iteration:
                return False
            data.resumed[response_id] = iteration
            return True

    def release_resume(self, session_id: str, response_id: str, iteration: int) -> None:
        with self._lock:
            data = self._sessions.get(session_id)
            if data is not None and data.resumed.get(response_id) == iteration:
                del data.resumed[response_id]

    def get_call(self, session_id: str, response_id: str, call_id: str) -> PendingCall | None:
        with self._lock:
            data = self._sessions.get(session_id)
            call = data.calls.get((response_id, call_id)) if data else None
            return call.model_copy(deep=True) if call else None

    def list_calls(
        self, session_id: str, response_id: str, *, iteration: int | None = None
    ) -> list[PendingCall]:
        with self._lock:
            data = self._sessions.get(session_id)
            calls = [
                c.model_copy(deep=True)
                for (rid, _), c in (data.calls.items() if data else [])
                if rid == response_id and (iteration is None or c.iteration == iteration)
            ]
        return sorted(calls, key=lambda c: (c.iteration, c.index))

    def answer_call(
        self,
        call: PendingCall,
        output: str,
        *,
        count_down: bool = True,
        details: dict[str, Any] | None = None,
    ) -> bool:
        with self._lock:
            data = self._sessions.get(call.session_id)
            if data is None:
                return False
            stored = data.calls.get((call.response_id, call.call_id))
            turn = data.turns.get(call.response_id)
            if (
                stored is None
                or stored.output is not None
                or turn is None
                or (count_down and turn.unanswered <= 0)
                or data.session.active_response_id != call.response_id
            ):
                return False
            data.calls[(call.response_id, call.call_id)] = stored.model_copy(
                update={"output": output, "answered_at": int(time.time()), "details": details}
            )
            if count_down:
                data.turns[call.response_id] = turn.model_copy(update={"unanswered": turn.unanswered - 1})
            return True

    # ------------------------------------------------------------------- files
    def add_file(self, file: SessionFile, data: bytes, limits: FileLimits) -> None:
        with self._lock:
            stored = self._data(file.session_id)
            limits.check(self._totals(stored), file.bytes)
            if file.id in stored.files:
                raise ConflictError(f"a file with id {file.id!r} already exists")
            stored.files[file.id] = (file.model_copy(deep=True), bytes(data))

    @staticmethod
    def _totals(data: _SessionData) -> tuple[int, int]:
        return len(data.files), sum(f.bytes for f, _ in data.files.values())

    def file_totals(self, session_id: str) -> tuple[int, int]:
        with self._lock:
            data = self._sessions.get(session_id)
            return self._totals(data) if data else (0, 0)

    def get_file(self, session_id: str, file_id: str) -> SessionFile | None:
        with self._lock:
            data = self._sessions.get(session_id)
            found = data.files.get(file_id) if data else None
            return found[0].model_copy(deep=True) if found else None

    def read_file(self, file: SessionFile) -> bytes:
        with self._lock:
            data = self._sessions.get(file.session_id)
            found = data.files.get(file.id) if data else None
            if found is None:
                raise NotFoundError(f"File not found: '{file.id}'")
            return found[1]

    def list_files(self, session_id: str) -> list[SessionFile]:
        with self._lock:
            data = self._sessions.get(session_id)
            found = [f.model_copy(deep=True) for f, _ in (data.files.values() if data else [])]
        return sorted(found, key=lambda f: (f.created_at, f.id))

    def delete_file(self, session_id: str, file_id: str) -> SessionFile | None:
        with self._lock:
            data = self._sessions.get(session_id)
            found = data.files.pop(file_id, None) if data else None
            return found[0] if found else None

    # ------------------------------------------------------------------ tokens
    def count_sessions(self, owner: str, *, running_only: bool = False) -> int:
        with self._lock:
            return sum(
                1
                for d in self._sessions.values()
                if d.session.owner == owner and (not running_only or d.session.status == "running")
            )

    def take_quota_slot(self, owner: str, window: str, limit: int, expires_at: int) -> bool:  # noqa: ARG002
        with self._lock:
            used = self._quota.get((owner, window), 0)
            if used >= limit:
                return False
            self._quota[(owner, window)] = used + 1
            return True

    def put_token(self, token: TokenRecord) -> None:
        with self._lock:
            if token.token_hash in self._tokens:
                raise ConflictError("that token already exists")
            self._tokens[token.token_hash] = token

    def get_token(self, token_hash: str) -> TokenRecord | None:
        with self._lock:
            return self._tokens.get(token_hash)

    def list_tokens(self, *, owner: str | None = None) -> list[TokenRecord]:
        with self._lock:
            found = [t for t in self._tokens.values() if owner is None or t.owner == owner]
        return sorted(found, key=lambda t: (t.created_at, t.id))

    def delete_token(self, token_hash: str) -> TokenRecord | None:
        with self._lock:
            return self._tokens.pop(token_hash, None)

    # --------------------------------------------------------------- schedules
    def create_scheduled_task(self, task: ScheduledTask) -> None:
        with self._lock:
            if task.id in self._tasks:
                raise ConflictError(f"a scheduled task with id {task.id!r} already exists")
            self._tasks[task.id] = (task.model_copy(deep=True), self._created(task.id))
            self._runs[task.id] = {}

    def get_scheduled_task(self, task_id: str) -> ScheduledTask | None:
        with self._lock:
            found = self._tasks.get(task_id)
            return found[0].model_copy(deep=True) if found else None

    def replace_scheduled_task(self, task: ScheduledTask, *, revision: int) -> bool:
        with self._lock:
            found = self._tasks.get(task.id)
            if found is None or found[0].revision != revision:
                return False
            self._tasks[task.id] = (task.model_copy(update={"revision": revision + 1}, deep=True), found[1])
            return True

    def list_scheduled_tasks(self, *, owner: str) -> list[ScheduledTask]:
        with self._lock:
            rows = sorted((c, t) for t, c in self._tasks.values() if t.owner == owner)
            return [t.model_copy(deep=True) for _, t in reversed(rows)]

    def count_scheduled_tasks(self, owner: str) -> int:
        with self._lock:
            return sum(1 for t, _ in self._tasks.values() if t.owner == owner)

    def list_due_scheduled_tasks(self, *, before: int) -> list[ScheduledTask]:
        with self._lock:
            due = [
                t.model_copy(deep=True)
                for t, _ in self._tasks.values()
                if t.state == "active" and t.next_run_at is not None and t.next_run_at <= before
            ]
        return sorted(due, key=lambda t: (t.next_run_at or 0, t.id))

    def delete_scheduled_task(self, task_id: str) -> None:
        with self._lock:
            self._tasks.pop(task_id, None)
            self._runs.pop(task_id, None)

    def put_scheduled_run(self, run: ScheduledRun) -> bool:
        with self._lock:
            runs = self._runs.setdefault(run.task_id, {})
            if run.id in runs:
                return False
            runs[run.id] = run.model_copy(deep=True)
            return True

    def get_scheduled_run(self, task_id: str, run_id: str) -> ScheduledRun | None:
        with self._lock:
            run = self._runs.get(task_id, {}).get(run_id)
            return run.model_copy(deep=True) if run else None

    def replace_scheduled_run(self, run: ScheduledRun, *, status: str) -> bool:
        with self._lock:
            runs = self._runs.get(run.task_id, {})
            if run.id not in runs or runs[run.id].status != status:
                return False
            runs[run.id] = run.model_copy(deep=True)
            return True

    def list_scheduled_runs(
        self, task_id: str, *, limit: int = 100, after: str | None = None
    ) -> tuple[list[ScheduledRun], bool]:
        with self._lock:
            runs = sorted(self._runs.get(task_id, {}).values(), key=lambda r: r.id, reverse=True)
            if after:
                runs = [r for r in runs if r.id < after]
            return [r.model_copy(deep=True) for r in runs[:limit]], len(runs) > limit

    # ------------------------------------------------------------- maintenance
    def sweep_expired(self, now: int | None = None) -> int:
        now = int(time.time()) if now is None else now
        deleted = 0
        with self._lock:
            for data in self._sessions.values():
                kept = [(e, x) for e, x in data.events if x >= now]
                deleted += len(data.events) - len(kept)
                data.events = kept
                stale = [k for k, x in data.dedupe.items() if x < now]
                for k in stale:
                    del data.dedupe[k]
                deleted += len(stale)
        return deleted
