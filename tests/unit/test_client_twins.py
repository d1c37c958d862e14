"""The sync and async SDK stay twins: same public names, parameters, defaults and types; async where it waits.

Inspects ``Client``/``AsyncClient``, ``EventStream``/``AsyncEventStream``,
``Session``/``AsyncSession``, ``Turn``/``AsyncTurn`` and the two
``with_raw_response`` namespaces. The only differences allowed are the
asyncio spellings (``aclose``, ``__aenter__``, ``__aiter__``, ...), ``async``
on everything that does I/O, the ``Async`` twin types in annotations, and the
awaitable hook variants the async side accepts on top of the plain ones.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from skyloop.client import (
    AsyncClient,
    AsyncEventStream,
    AsyncLiveEventStream,
    AsyncSession,
    AsyncTurn,
    Client,
    EventStream,
    LiveEventStream,
    Session,
    Turn,
)

PAIRS = [
    (Client, AsyncClient),
    (EventStream, AsyncEventStream),
    (LiveEventStream, AsyncLiveEventStream),
    (Session, AsyncSession),
    (Turn, AsyncTurn),
]
ASYNC_NAME = {
    "close": "aclose",
    "__enter__": "__aenter__",
    "__exit__": "__aexit__",
    "__iter__": "__aiter__",
    "__next__": "__anext__",
}
PROTOCOL_DUNDERS = ("__init__", *[n for n in ASYNC_NAME if n.startswith("__")])
HOOK_PARAMETERS = {"confirm": "ConfirmTool", "on_tool_start": "ToolStartHook", "on_tool_end": "ToolEndHook"}
SID = "a" * 32


def _public(cls: type) -> dict[str, Any]:
    """Public class members (properties and methods), plus the protocol dunders the class defines."""
    names = [n for n in dir(cls) if not n.startswith("_")]
    names += [n for n in (*PROTOCOL_DUNDERS, *ASYNC_NAME.values()) if n in vars_chain(cls)]
    return {n: inspect.getattr_static(cls, n) for n in names}


def vars_chain(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ if klass is not object for name in vars(klass)}


def _normalize(annotation: Any) -> str:
    """An annotation with the async spellings mapped onto the sync ones.

    ``X | AsyncX`` (a hook and its awaitable variant) reads as ``X``; then
    ``AsyncClient``, ``AsyncIterator``, ``AsyncTransport``/``SyncTransport``,
    ``httpx.AsyncBaseTransport`` ... lose their prefix.
    """
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    text = re.sub(r"\b(\w+) \| Async\1\b", r"\1", text)
    return re.sub(r"\b(?:Async|Sync)(?=[A-Z])", "", text)


def _parameters(fn: Callable[..., Any]) -> list[tuple[str, Any, Any, str]]:
    return [
        (p.name, p.kind, p.default, _normalize(p.annotation))
        for p in inspect.signature(fn).parameters.values()
    ]


def _returns(fn: Callable[..., Any]) -> str:
    annotation = inspect.signature(fn).return_annotation
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _assert_twin_functions(where: str, sync_fn: Callable[..., Any], async_fn: Callable[..., Any]) -> None:
    assert _parameters(sync_fn) == _parameters(async_fn), f"{where}: parameters differ"
    assert _normalize(_returns(sync_fn)) == _normalize(_returns(async_fn)), f"{where}: return types differ"
    assert not inspect.iscoroutinefunction(sync_fn), f"{where}: the sync twin is a coroutine function"
    assert not inspect.isasyncgenfunction(sync_fn), f"{where}: the sync twin is an async generator"
    name = where.rsplit(".", 1)[-1]
    if name in ("__init__",):
        assert not inspect.iscoroutinefunction(async_fn), f"{where}: __init__ cannot be async"
    elif inspect.isgeneratorfunction(sync_fn):
        assert inspect.isasyncgenfunction(async_fn), (
            f"{where}: a sync generator needs an async generator twin"
        )
    elif not (inspect.iscoroutinefunction(async_fn) or inspect.isasyncgenfunction(async_fn)):
        # A plain def on the async side only hands out an async object (stream, turn, session, iterator).
        returns = _returns(async_fn)
        assert returns.startswith("Async"), (
            f"{where}: should be a coroutine function, or return an Async twin"
        )
        assert returns == "Async" + _returns(sync_fn), (
            f"{where}: returns {returns}, not the twin of the sync type"
        )


@pytest.mark.parametrize(("sync_cls", "async_cls"), PAIRS, ids=lambda c: c.__name__)
def test_sync_and_async_public_methods_match(sync_cls: type, async_cls: type) -> None:
    sync_members = _public(sync_cls)
    async_members = _public(async_cls)
    # Then the same public names, spelled the asyncio way where httpx does too
    assert {ASYNC_NAME.get(n, n) for n in sync_members} == set(async_members)
    for name, sync_member in sync_members.items():
        async_name = ASYNC_NAME.get(name, name)
        async_member = async_members[async_name]
        where = f"{async_cls.__name__}.{async_name}"
        if isinstance(sync_member, property):
            assert isinstance(async_member, property), f"{where}: should be a property"
            assert _normalize(_returns(sync_member.fget)) == _normalize(_returns(async_member.fget))  # type: ignore[arg-type]
            continue
        assert callable(sync_member)
        assert callable(async_member)
        _assert_twin_functions(where, sync_member, async_member)


def _instances() -> list[tuple[object, object]]:
    """One of each twin, built without any I/O (turns and streams are lazy)."""
    client = Client("http://sky.test", transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    aclient = AsyncClient("http://sky.test", transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    session, asession = client.session(SID), aclient.session(SID)
    return [
        (client, aclient),
        (client.stream(SID, after=0), aclient.stream(SID, after=0)),
        (session, asession),
        (session.send("hi"), asession.send("hi")),
    ]


def test_sync_and_async_instances_carry_the_same_public_attributes() -> None:
    for sync_obj, async_obj in _instances():
        sync_attrs = {k for k in vars(sync_obj) if not k.startswith("_")}
        async_attrs = {k for k in vars(async_obj) if not k.startswith("_")}
        assert sync_attrs == async_attrs, type(async_obj).__name__


def test_raw_response_namespaces_are_twins_and_mirror_the_typed_methods() -> None:
    client, aclient = _instances()[0]
    assert isinstance(client, Client)
    assert isinstance(aclient, AsyncClient)
    raw, araw = vars(client.with_raw_response), vars(aclient.with_raw_response)
    assert set(raw) == set(araw)
    # Every single-request method has a raw counterpart ...
    multi_request = {
        "iter_agents",
        "iter_sessions",
        "iter_items",
        "stream",
        "watch",
        "live_url",
        "session",
        "close",
        "is_closed",
    }
    typed = {n for n in _public(Client) if not n.startswith("_")} - multi_request
    assert set(raw) == typed
    for name in raw:
        # ... taking exactly the typed method's parameters, awaitable on the async side
        typed_params = _parameters(getattr(Client, name))[1:]  # without self
        assert _parameters(raw[name]) == typed_params, name
        assert _parameters(araw[name]) == typed_params, name
        assert not inspect.iscoroutinefunction(raw[name]), name
        assert inspect.iscoroutinefunction(araw[name]), name


@pytest.mark.parametrize(
    "fn",
    [
        Client.session,
        AsyncClient.session,
        Session.__init__,
        AsyncSession.__init__,
        Session.send,
        AsyncSession.send,
        Turn.__init__,
        AsyncTurn.__init__,
    ],
    ids=lambda f: f.__qualname__,
)
def test_hook_parameters_are_typed_with_the_hook_protocols(fn: Callable[..., Any]) -> None:
    parameters = inspect.signature(fn).parameters
    for name, protocol in HOOK_PARAMETERS.items():
        annotation = parameters[name].annotation
        assert "Any" not in annotation, f"{fn.__qualname__}({name}) is typed {annotation}"
        alternatives = [a.strip() for a in annotation.split("|")]
        if fn.__qualname__.startswith("Async"):
            assert alternatives == [protocol, f"Async{protocol}", "None"], annotation
        else:
            assert alternatives == [protocol, "None"], annotation
