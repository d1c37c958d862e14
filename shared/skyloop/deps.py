"""Wiring in one place: boto3 clients and the store, built lazily once per container.

The ports of the layers above (the turn engine, the schedules) are built by
their own modules with :func:`per_container`, so this module sits just above
the store and everything may use it.

boto3 is imported inside the builders so that modules which only need models
(and tests) do not pay for it at import time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable  # noqa: TC003  (the TypeVar's bound is evaluated)
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from skyloop.settings import get_settings

if TYPE_CHECKING:
    from skyloop.runners import Runners
    from skyloop.secrets import SecretsManagerStore
    from skyloop.store import DynamoStore
    from skyloop.store.dynamodb.live import LiveRecords


F = TypeVar("F", bound="Callable[..., Any]")
_per_container: list[Any] = []  # what reset() forgets beside this module's own builders


def per_container(builder: F) -> F:
    """Build once per container, forgotten by :func:`reset`: for the ports the layers above own
    (the turn engine, the schedules), so that this module imports nothing above the store."""
    cached = lru_cache(maxsize=1)(builder)
    _per_container.append(cached)
    return cached  # type: ignore[return-value]


_client_lock = threading.Lock()  # a boto3 Session is not safe to build clients from on two threads at once


@cache
def session() -> Any:
    """The process's one boto3 Session (credentials resolved once, models loaded once)."""
    import boto3  # deferred: ~0.4 s of cold start only where a client is really needed
    import botocore.session

    from skyloop.aws_session import shared_loader

    core = botocore.session.get_session()
    core.register_component("data_loader", shared_loader(core.get_config_variable("data_path")))
    return boto3.session.Session(botocore_session=core)


@cache
def client(service: str) -> Any:
    with _client_lock:
        return session().client(service)


@lru_cache(maxsize=1)
def store() -> DynamoStore:
    from skyloop.store import DynamoStore
    from skyloop.store.blobs import S3Blobs

    settings = get_settings()
    # the S3 client is built when a blob is first needed (most containers never need one)
    blobs = S3Blobs(lambda: client("s3"), settings.blob_bucket) if settings.blob_bucket else None
    return DynamoStore(settings.table_name, client("dynamodb"), event_ttl_s=settings.event_ttl_s, blobs=blobs)


@lru_cache(maxsize=1)
def live_records() -> LiveRecords:
    """Live connections and subscriptions (the cloud's ``live`` and ``push_fanout`` functions)."""
    from skyloop.store.blobs import S3Blobs
    from skyloop.store.dynamodb.live import LiveRecords

    settings = get_settings()
    blobs = S3Blobs(client("s3"), settings.blob_bucket) if settings.blob_bucket else None
    return LiveRecords(settings.table_name, client("dynamodb"), event_ttl_s=settings.event_ttl_s, blobs=blobs)


@lru_cache(maxsize=1)
def secrets() -> SecretsManagerStore:
    """Agent secrets (model keys) in Secrets Manager."""
    from skyloop.secrets import SecretsManagerStore

    return SecretsManagerStore(client("secretsmanager"))


@lru_cache(maxsize=1)
def runners() -> Runners:
    """This deployment's one runner: its turn state machine, online when one is configured."""
    from skyloop.runners import Runners

    settings = get_settings()
    return Runners(settings.default_runner_id, online=bool(settings.state_machine_arn))


def reset() -> None:
    """Forget cached clients, the session and settings (tests switch environments between cases)."""
    client.cache_clear()
    session.cache_clear()
    store.cache_clear()
    live_records.cache_clear()
    secrets.cache_clear()
    for cached in _per_container:
        cached.cache_clear()
    runners.cache_clear()
    get_settings.cache_clear()
