"""Make moto's Step Functions executor cheap per state: no re-parsing, no client rebuilding.

moto's ASL interpreter, per execution and per state, redoes work whose result
never changes:

* it parses the state machine's definition with ANTLR on every StartExecution
  (~90 ms of CPU for the turn machine): the local stack parses each definition
  once, keeps the parsed program pickled, and hands every execution its own
  unpickled copy (0.5-3 ms; ``copy.deepcopy`` of the same program, which is what
  an unpickled copy equals here, takes 6 ms), so no execution can see
  another's state; the next execution's copy is unpickled on a background
  thread as one starts, so a turn's StartExecution does not wait for it;
* it compiles every JSONPath (``$.Payload``, ``$.error``...) with a freshly
  generated parser each time it is evaluated (~0.6 ms each): compiled paths
  are immutable, so they are cached by their text;
* it builds a new boto3 client for every ``lambda:invoke`` task (5-15 ms):
  boto3 clients are thread-safe, so one per (region, service) is reused.

Real Step Functions needs none of this.
"""

from __future__ import annotations

import copy
import functools
import json
import pickle
import sys
import threading
from typing import TYPE_CHECKING, Any, cast

from skyloop.local._patch import replace

if TYPE_CHECKING:
    from collections.abc import Callable

    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

_clients: dict[tuple[str, str, bool], Any] = {}


def _frozen(program: Any) -> Any:
    """The program as pickle bytes (each execution unpickles its own copy), or itself if it cannot be."""
    try:
        return pickle.dumps(program, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return program


_programs: dict[str, Any] = {}
_spares: dict[str, list[Any]] = {}  # definition -> copies unpickled ahead of the executions that take them
_lock = threading.Lock()
_refill: list[Any] = []  # the one thread pool that unpickles spares (made on first use)


def _copy_of(definition: str, frozen: Any) -> Any:
    """A copy of the program for one execution: a spare made ahead if there is one; then make the next."""
    if not isinstance(frozen, bytes):
        return copy.deepcopy(frozen)
    with _lock:
        spares = _spares.setdefault(definition, [])
        program = spares.pop() if spares else None
        if not _refill:
            from concurrent.futures import ThreadPoolExecutor

            _refill.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="sfn-spare"))
        pool = _refill[0]
    pool.submit(_make_spare, definition, frozen)
    return pickle.loads(frozen) if program is None else program


def _make_spare(definition: str, frozen: bytes) -> None:
    with _lock:
        if len(_spares.get(definition, ())) >= 1:
            return
    program = pickle.loads(frozen)
    with _lock:
        _spares.setdefault(definition, []).append(program)


_undo: list[Callable[[], None]] = []


def skip_batch() -> None:
    """Let the interpreter load without moto's Batch and EC2 (about 100 MB of the stack's memory).

    The interpreter's ``arn:aws:states:::batch`` integration imports
    ``moto.batch.utils`` for one enum; importing that package runs
    ``moto/batch/__init__.py``, which loads moto's EC2 models and their instance
    type tables (~100 MB resident, ~1 s). The turn machine has no Batch task,
    so ``moto.batch`` is registered as a bare package: ``moto.batch.utils`` still
    imports from its real file, the rest of moto's Batch does not load (a Batch
    request to the local stack fails).
    """
    import importlib.util
    import types

    if "moto.batch" in sys.modules:
        return
    spec = importlib.util.find_spec("moto.batch")
    if spec is None or spec.submodule_search_locations is None:
        return
    package = types.ModuleType("moto.batch")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules["moto.batch"] = package


def install() -> Callable[[], None]:  # noqa: C901  (the patch set is one unit with one undo)
    """Apply the three caches; returns the undo."""
    skip_batch()
    import moto.stepfunctions.parser.asl.component.common.path.result_path as result_path
    import moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils  # noqa: F401
    import moto.stepfunctions.parser.asl.utils.json_path as json_path
    from moto.core.models import botocore_stubber
    from moto.stepfunctions.parser.asl.utils import boto_client
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    if _undo:
        return lambda: None
    original_client = boto_client.boto_client_for

    def cached_client(region: str, service: str, state_credentials: Any = None) -> Any:  # noqa: ARG001
        # moto's builder ignores the state's credentials too (every client uses fixed local keys)
        key = (region, service, bool(botocore_stubber.enabled))
        with _lock:
            if key not in _clients:
                _clients[key] = original_client(region=region, service=service)
            return _clients[key]

    patched = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("moto.stepfunctions.parser")
        and getattr(module, "boto_client_for", None) is original_client
    ]
    for module in patched:
        replace(module, "boto_client_for", cached_client)

    path_parsers: list[tuple[Any, Any]] = [(json_path, json_path.parse), (result_path, result_path.parse)]
    for module, parse in path_parsers:
        replace(module, "parse", functools.lru_cache(maxsize=1024)(parse))

    original_entrypoint = ExecutionWorker._get_evaluation_entrypoint

    def entrypoint(self: Any) -> Any:
        definition = self._evaluation_details.state_machine_details.definition
        with _lock:
            if definition not in _programs:
                _programs[definition] = _frozen(original_entrypoint(self))
            program = _programs[definition]
        return _started_at(_copy_of(definition, program), self._evaluation_details.execution_details.inpt)

    replace(ExecutionWorker, "_get_evaluation_entrypoint", entrypoint)

    def undo() -> None:
        for module in patched:
            replace(module, "boto_client_for", original_client)
        for module, parse in path_parsers:
            replace(module, "parse", parse)
        replace(ExecutionWorker, "_get_evaluation_entrypoint", original_entrypoint)
        _clients.clear()
        _programs.clear()
        _spares.clear()
        _undo.clear()

    _undo.append(undo)
    return undo


def _started_at(program: Any, execution_input: Any) -> Any:
    """The execution's own copy of the program, beginning at the state its input names, if it names one.

    Only the local stack's restarts set that field (:data:`skyloop.local.recovery.START_AT`), to
    continue a turn whose execution did not survive the stack; a state the program lacks is an error.
    """
    from moto.stepfunctions.parser.asl.component.common.flow.start_at import StartAt

    from skyloop.local.recovery import START_AT

    if isinstance(execution_input, str):
        try:
            execution_input = json.loads(execution_input)
        except ValueError:
            return program
    if not isinstance(execution_input, dict) or START_AT not in execution_input:
        return program
    name = execution_input[START_AT]
    if name not in program.states.states:
        raise ValueError(f"{START_AT}: the state machine has no state {name!r}")
    program.start_at = StartAt(start_at_name=name)
    return program


KEEP_FINISHED = 200  # finished executions a state machine keeps (the newest; running ones are all kept)


def bound_executions(keep: int = KEEP_FINISHED) -> Callable[[], None]:
    """Keep the newest ``keep`` finished executions of a state machine, not every one since the start.

    moto keeps every execution with its whole event history (every state's
    input and output), and scans them all on every StartExecution, describe
    and task token: after a thousand turns both the stack's memory and every
    turn's cost had grown with all the turns before it. Each StartExecution
    first drops the oldest finished executions beyond ``keep`` (a new list, so
    a describe iterating the old one is not disturbed; under a lock, so no
    start is lost). Turns never read a finished execution's history; the
    reconciler sees a pruned execution as ended, as it is. Returns the undo.
    """
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original = StepFunctionsParserBackend.start_execution
    lock = threading.Lock()

    def start_execution(self: Any, state_machine_arn: str, *args: Any, **kwargs: Any) -> Any:
        with lock:
            machine = self.describe_state_machine(state_machine_arn)
            executions = machine.executions
            finished = [e for e in executions if e.exec_status != "RUNNING"]
            if len(finished) > keep:
                drop = {id(e) for e in finished[: len(finished) - keep]}
                machine.executions = [e for e in executions if id(e) not in drop]
            return original(self, state_machine_arn, *args, **kwargs)

    def undo() -> None:
        replace(StepFunctionsParserBackend, "start_execution", original)

    replace(StepFunctionsParserBackend, "start_execution", start_execution)
    return undo


def report_heartbeat_timeouts() -> Callable[[], None]:
    """Make a missed heartbeat fail its task with ``States.HeartbeatTimeout``, as Step Functions does.

    moto raises its heartbeat timeout as a ``TimeoutError`` and reports every
    ``TimeoutError`` as ``States.Timeout``, so a client that stopped sending
    heartbeats would look like one that missed its deadline
    (``client_tool_timeout`` instead of ``client_heartbeat_timeout``). Returns the undo.
    """
    from moto.stepfunctions.parser.api import HistoryEventType, TaskTimedOutEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task import StateTask
    from moto.stepfunctions.parser.asl.eval.callback.callback import HeartbeatTimeoutError

    original = StateTask._from_error

    def from_error(self: Any, env: Any, ex: Exception) -> Any:
        if not isinstance(ex, HeartbeatTimeoutError):
            return original(self, env, ex)
        name = StatesErrorNameType.StatesHeartbeatTimeout
        return FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=name),
            event_type=HistoryEventType.TaskTimedOut,
            event_details=cast(
                "EventDetails", {"taskTimedOutEventDetails": TaskTimedOutEventDetails(error=name.to_name())}
            ),
        )

    def undo() -> None:
        replace(StateTask, "_from_error", original)

    replace(StateTask, "_from_error", from_error)
    return undo
