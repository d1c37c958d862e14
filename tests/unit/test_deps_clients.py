"""The process's boto3 clients come from one session and one botocore loader (see skyloop.deps)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skyloop import aws_session, deps


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    deps.reset()
    yield
    deps.reset()


def test_clients_share_one_session_and_its_loader() -> None:
    dynamodb, sfn = deps.client("dynamodb"), deps.client("stepfunctions")
    assert deps.client("dynamodb") is dynamodb
    loader = deps.session()._session.get_component("data_loader")
    assert loader is aws_session.shared_loader(None)
    # one parse of a model per process: a second session's client reads the loader's cached copy
    deps.reset()
    assert deps.client("dynamodb") is not dynamodb
    assert deps.session()._session.get_component("data_loader") is loader
    assert sfn.meta.region_name == "us-east-1"


def test_shared_loader_keeps_each_search_path_once() -> None:
    import boto3

    loader = aws_session.shared_loader(None)
    deps.session()
    deps.reset()
    deps.session()
    core = deps.session()._session
    boto3.session.Session(botocore_session=core)  # every boto3 Session appends its data directory
    assert len(loader.search_paths) == len(set(loader.search_paths))


def test_share_loader_gives_every_new_botocore_session_the_process_loader() -> None:
    import botocore.session

    original = botocore.session.Session._register_data_loader
    try:
        aws_session.share_loader()
        a, b = botocore.session.get_session(), botocore.session.get_session()
        assert a.get_component("data_loader") is b.get_component("data_loader")
        assert a.get_component("data_loader") is aws_session.shared_loader(a.get_config_variable("data_path"))
    finally:
        botocore.session.Session._register_data_loader = original  # type: ignore[method-assign]
