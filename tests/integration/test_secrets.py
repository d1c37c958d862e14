"""Secrets Manager behind the model step: a warm container reads an agent's key once per cache period.

Every model call reads its agent's key, so a store that asks Secrets Manager
each time pays a request (latency, cost, the API's rate limit) per model call.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from moto import mock_aws

from skyloop.secrets import SecretsManagerStore

if TYPE_CHECKING:
    from collections.abc import Iterator


class Calls:
    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()

    def count(self, model: Any, **_: Any) -> None:
        self.ops[model.name] += 1


@pytest.fixture
def counted() -> Iterator[tuple[SecretsManagerStore, Calls]]:
    with mock_aws():
        client = boto3.session.Session().client(
            "secretsmanager",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        calls = Calls()
        client.meta.events.register("before-call.secrets-manager", calls.count)
        yield SecretsManagerStore(client), calls


def test_a_key_is_read_from_secrets_manager_once_then_from_the_cache(
    counted: tuple[SecretsManagerStore, Calls],
) -> None:
    store, calls = counted
    name = store.put("skyloop/agents/a1/api_key", "key-1")
    assert [store.get(name) for _ in range(5)] == ["key-1"] * 5
    assert calls.ops["GetSecretValue"] == 1


def test_a_key_written_through_the_store_is_read_back_at_once(
    counted: tuple[SecretsManagerStore, Calls],
) -> None:
    store, calls = counted
    name = store.put("skyloop/agents/a2/api_key", "key-1")
    assert store.get(name) == "key-1"
    store.put(name, "key-2")  # a new version of the same agent's key
    assert store.get(name) == "key-2"
    store.delete(name)
    with pytest.raises(GetParameterError, match="ResourceNotFound"):
        store.get(name)
    assert calls.ops["GetSecretValue"] == 3
