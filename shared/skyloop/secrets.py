"""Agent secrets (model API keys) live in AWS Secrets Manager, never in the table.

When an agent version is registered with ``executor.auth.api_key``, the key is
written to a secret named ``<prefix>/<agent id>/api_key`` and the stored agent
keeps only that name; the spec is stored without the key. Only the model step
reads it back, through Powertools Parameters (cached for a few minutes in a
warm container), and the stack grants ``secretsmanager:GetSecretValue`` on
the prefix to that function's role alone. The local stack uses moto's Secrets
Manager; unit tests use :class:`MemorySecrets`.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Protocol

SECRET_CACHE_S = 300  # a rotated key reaches warm model steps within five minutes


class SecretStore(Protocol):
    def put(self, name: str, value: str) -> str:
        """Store ``value`` under ``name``; returns the reference to keep."""
        ...

    def get(self, reference: str) -> str: ...

    def delete(self, reference: str) -> None:
        """Remove the secret at once (an agent's removal); one already gone is not an error."""
        ...


def api_key_secret_name(prefix: str, agent_id: str) -> str:
    return f"{prefix.rstrip('/')}/{agent_id}/api_key"


class SecretsManagerStore:
    """Secrets Manager through a ready ``boto3`` client (writes) and Powertools Parameters (reads)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._provider: Any = None  # one per store: Powertools caches values per provider instance

    def put(self, name: str, value: str) -> str:
        try:
            self.client.create_secret(Name=name, SecretString=value)
        except self.client.exceptions.ResourceExistsException:
            self.client.put_secret_value(SecretId=name, SecretString=value)
        self._forget()
        return name

    def get(self, reference: str) -> str:
        if self._provider is None:
            from aws_lambda_powertools.utilities import parameters  # deferred: only the model step reads

            self._provider = parameters.SecretsProvider(boto3_client=self.client)
        return str(self._provider.get(reference, max_age=SECRET_CACHE_S))

    def delete(self, reference: str) -> None:
        # no recovery window: a removed agent's key must stop existing, not linger for 7-30 days
        with contextlib.suppress(self.client.exceptions.ResourceNotFoundException):
            self.client.delete_secret(SecretId=reference, ForceDeleteWithoutRecovery=True)
        self._forget()

    def _forget(self) -> None:
        """A write through this store is read back at once (other containers wait out the cache)."""
        if self._provider is not None:
            self._provider.clear_cache()


class MemorySecrets:
    """A dict behind the same interface (unit tests)."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.reads = 0
        self._lock = threading.Lock()

    def put(self, name: str, value: str) -> str:
        with self._lock:
            self.values[name] = value
        return name

    def get(self, reference: str) -> str:
        with self._lock:
            self.reads += 1
            return self.values[reference]

    def delete(self, reference: str) -> None:
        with self._lock:
            self.values.pop(reference, None)
