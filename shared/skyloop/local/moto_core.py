"""Take per-request work that nothing reads out of moto's dispatch and boto3's requests.

Every request moto serves lists its handler class's methods with
``inspect.getmembers`` to check the action exists (about 0.1 ms, more than a
GetItem's own work). A class's methods do not change while the stack runs,
so the list is computed once per class. The local stack's own clients also
skip SigV4 signing for the services on its hot path (:func:`skip_signing`).
Real AWS needs none of this.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

from skyloop.local._patch import replace

# What every process hosting the local stack's moto runs it with (the stack's and the DynamoDB process).
REGION = "us-east-1"
MOTO_CONFIG: Any = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
    "core": {"passthrough": {"services": ["bedrockruntime"]}},  # models are real (or the scripted one)
}

if TYPE_CHECKING:
    from collections.abc import Callable

_undo: list[Callable[[], None]] = []


def install() -> Callable[[], None]:
    import moto.core.responses as responses

    if _undo:
        return lambda: None
    original = responses.method_names_from_class

    @functools.cache
    def cached(clazz: Any) -> list[str]:
        return original(clazz)

    replace(responses, "method_names_from_class", cached)

    def undo() -> None:
        replace(responses, "method_names_from_class", original)
        _undo.clear()

    _undo.append(undo)
    return undo


UNSIGNED_SERVICES = ("dynamodb", "sfn", "lambda")  # botocore service ids of the hot paths


def _unsigned(**_: Any) -> Any:
    import botocore

    return botocore.UNSIGNED


def skip_signing() -> None:
    """Let this process's future boto3 clients send the hot services' requests unsigned.

    Every request of the local stack is served by moto in this process tree,
    which reads no signature (an unsigned request is moto's default account,
    as the stack's fixed local keys are); SigV4 signing was a sixth of a turn
    step's CPU. Registered first, so it wins over the operation's own signer.
    """
    import botocore.handlers

    for service in UNSIGNED_SERVICES:
        spec = (f"choose-signer.{service}", _unsigned, botocore.handlers.REGISTER_FIRST)
        if spec not in botocore.handlers.BUILTIN_HANDLERS:
            botocore.handlers.BUILTIN_HANDLERS.append(spec)


_untracked: list[Callable[[], None]] = []


def untrack_models() -> Callable[[], None]:
    """Stop moto from keeping every model object it ever creates; returns the undo.

    ``moto.core.common_models.BaseModel.__new__`` appends each new instance to
    its class's ``instances_tracked`` list, for moto's dashboard
    (``/moto-api/data.json``) and ``reset()``, and nothing ever removes one.
    In a long-running stack that list holds every DynamoDB ``Item`` image ever
    built (each put, update, transaction copy), every Step Functions execution
    and every S3 key version, long after moto itself dropped them: the
    DynamoDB process grew with every write, not with what the table holds.
    Nothing in the local stack reads the lists (no dashboard, no reset), and
    S3 keys, the one class ``reset`` disposes from them, also dispose
    themselves when collected (``FakeKey.__del__``). Instances are created as
    before, only not remembered; lists already tracked are emptied.
    """
    from moto.core import common_models
    from moto.core.model_instances import model_data

    if _untracked:
        return lambda: None
    base = common_models.BaseModel
    original = base.__dict__["__new__"]

    def new(cls: Any, *_args: Any, **_kwargs: Any) -> Any:
        return super(base, cls).__new__(cls)  # what moto's does (a dict subclass gets dict's), minus the list

    base.__new__ = new  # type: ignore[method-assign]
    for models in model_data.values():
        for model in models.values():
            model.instances_tracked = []  # type: ignore[attr-defined]

    def undo() -> None:
        base.__new__ = original  # type: ignore[method-assign]
        _untracked.clear()

    _untracked.append(undo)
    return undo


MANAGED_POLICIES_MODULE = "moto.iam.aws_managed_policies"


def skip_managed_policies() -> bool:
    """Keep moto's copy of every AWS-managed IAM policy out of this process; True if it did.

    ``moto.iam.models`` imports ``moto.iam.aws_managed_policies``, one 4.7 MB
    JSON string of ~1,400 policies, and any request moto serves imports
    ``moto.iam`` (its access control), so every process hosting moto held it
    (and unmarshalled as much again from the ``.pyc`` while importing). moto
    parses it into policy objects only when ``load_aws_managed_policies`` is
    on (off by default, and nothing in the local stack attaches an AWS-managed
    policy), so the module is replaced, before anything imports it, by one
    whose data is an empty object. Left alone when the loading is switched on.
    """
    import types

    from moto.settings import load_iam_aws_managed_policies

    if MANAGED_POLICIES_MODULE in sys.modules or load_iam_aws_managed_policies():
        return False
    stub = types.ModuleType(MANAGED_POLICIES_MODULE, "AWS-managed IAM policies: none (skyloop's local stack)")
    stub.aws_managed_policies_data = "{}"  # type: ignore[attr-defined]
    sys.modules[MANAGED_POLICIES_MODULE] = stub
    return True


def lighten() -> None:
    """What every process of the local stack that hosts moto does first, before moto is imported.

    No AWS-managed IAM policies (:func:`skip_managed_policies`), no model
    instance kept for moto's dashboard (:func:`untrack_models`), one botocore
    loader for every session moto and the stack build
    (:func:`skyloop.aws_session.share_loader`). See bench/README.md, "Where the memory goes".
    """
    from skyloop import aws_session

    skip_managed_policies()
    untrack_models()
    aws_session.share_loader()


def release_botocore_data(region: str) -> None:
    """In a process that only serves DynamoDB and builds no client: free botocore's parsed files.

    moto lists a backend's regions from ``endpoints.json`` through a boto3
    Session of its own, kept for the process's lifetime with everything its
    loader parsed (~8.5 MB); that is needed once, when the backend is built.
    So the DynamoDB backend is built now, then that session and the loaders'
    caches are dropped. Something that needs them later parses them again.
    """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.core.base_backend import AccountSpecificBackend
    from moto.dynamodb.models import dynamodb_backends

    from skyloop import aws_session

    dynamodb_backends[DEFAULT_ACCOUNT_ID][region]  # built now: its regions are listed once
    AccountSpecificBackend.get_session.cache_clear()
    aws_session.release()
