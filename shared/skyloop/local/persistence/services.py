"""S3 objects and Secrets Manager secrets of the local stack on disk: a journal of the requests that change them.

These services are served by moto in the stack's own process, and they are
written seldom (a session file, a large tool output, an agent's model key),
so their journal keeps each changing request as it was sent (method, URL,
headers, body) and loading sends the requests to moto again, in order: moto
itself turns them back into buckets, objects and secrets, whatever its
version keeps internally. A changing request is applied and appended under
one lock (so the journal's order is the order applied) and answered only
once its record is on disk.

At start, when the journals have grown past ``SKYLOOP_SNAPSHOT_BYTES`` or
``MAX_JOURNALS`` files, the loaded state is written as a snapshot (each
bucket, object and secret once) and the older files are deleted; nothing
else runs at that moment, so no request can fall between the two.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skyloop.local.persistence.datadir import LoadReport, keep_damaged
from skyloop.local.persistence.dynamodb import MAX_JOURNALS, SNAPSHOT_BYTES
from skyloop.local.persistence.journal import (
    JournalWriter,
    file_name,
    frame,
    fsync_dir,
    iter_files,
    read_records,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

log = logging.getLogger("skyloop.local")
KIND = "s3 and secrets"
READ_ONLY_SECRETS = frozenset(
    {"GetSecretValue", "BatchGetSecretValue", "DescribeSecret", "ListSecrets", "ListSecretVersionIds",
     "GetResourcePolicy", "GetRandomPassword", "ValidateResourcePolicy"}
)  # fmt: skip


def service_of(url: str) -> str | None:
    """``s3``, ``secretsmanager`` or None for a request to another service."""
    host = urlsplit(url).hostname or ""
    s3_host = host.startswith("s3.") or ".s3." in host or ".s3-" in host
    if host == "s3.amazonaws.com" or (host.endswith(".amazonaws.com") and s3_host):
        return "s3"
    if host.startswith("secretsmanager."):
        return "secretsmanager"
    return None


def changes_state(method: str, url: str, headers: Any) -> bool:
    """Whether a request may change S3 or Secrets Manager (reads are never journaled)."""
    service = service_of(url)
    if service == "s3":
        return method in ("PUT", "POST", "DELETE")
    if service == "secretsmanager":
        target = headers.get("X-Amz-Target") or ""
        if isinstance(target, bytes):
            target = target.decode()
        return target.rpartition(".")[2] not in READ_ONLY_SECRETS
    return False


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


class ServicePersistence:
    """The S3 and Secrets Manager half of a data directory (see the module docstring)."""

    def __init__(self, directory: Path, data_root: Path) -> None:
        self.directory = directory
        self.data_root = data_root
        self.writer: JournalWriter | None = None
        self.generation = 0
        self.pending_bytes = 0
        self.pending_files = 0
        self.lock = threading.Lock()

    def _header(self, kind: str) -> dict[str, Any]:
        from skyloop.local.persistence.datadir import FORMAT

        return {"k": "header", "format": FORMAT, "file": f"aws-{kind}", "generation": self.generation}

    def load(self, send: Callable[[str, str, dict[str, str], bytes], int]) -> LoadReport:
        """Send every kept request to moto again (``send(method, url, headers, body) -> status``)."""
        report = LoadReport(KIND)
        for stale in self.directory.glob("*.tmp"):
            stale.unlink()
        snapshots = list(iter_files(self.directory, "snapshot"))
        start = 0
        files: list[tuple[Path, bool]] = []
        if snapshots:
            start, path = snapshots[-1]
            files.append((path, True))
        files += [(path, False) for gen, path in iter_files(self.directory, "journal") if gen >= start]
        for path, is_snapshot in files:
            self._load_file(path, is_snapshot, send, report)
        self.generation = max([g for g, _ in iter_files(self.directory, "journal")] + [start], default=0) + 1
        return report

    def _load_file(
        self,
        path: Path,
        is_snapshot: bool,
        send: Callable[[str, str, dict[str, str], bytes], int],
        report: LoadReport,
    ) -> None:
        records, damage = read_records(path)
        if is_snapshot:
            damage.missing_end = not records or records[-1].get("k") != "end"
        for record in records:
            if record.get("k") != "request":
                continue
            report.records += 1
            body = base64.b64decode(record.get("b") or "")
            status = send(record["m"], record["u"], dict(record.get("h") or {}), body)
            if status >= 300:
                report.notes.append(f"a kept {record['m']} {record['u'][:120]} answered {status} on load")
            else:
                report.items += 1
        if damage.damaged:
            report.damage.append(damage)
            report.kept.append(keep_damaged(self.data_root, path))
        elif damage.incomplete_tail:
            report.notes.append(damage.describe())
            os.truncate(path, path.stat().st_size - damage.incomplete_tail)
        if not is_snapshot:
            self.pending_bytes += path.stat().st_size
            self.pending_files += 1

    def start(self, export: Callable[[], list[tuple[str, str, dict[str, str], bytes]]]) -> None:
        """Journal from now on; first fold the journals into a snapshot if they have grown."""
        if self.pending_bytes > SNAPSHOT_BYTES or self.pending_files > MAX_JOURNALS:
            self._snapshot(export())
        self.writer = JournalWriter(
            self.directory / file_name("journal", self.generation), self._header("journal")
        )

    def _snapshot(self, requests: list[tuple[str, str, dict[str, str], bytes]]) -> None:
        final = self.directory / file_name("snapshot", self.generation)
        tmp = final.with_name(final.name + ".tmp")
        with open(tmp, "wb") as out:
            out.write(frame(self._header("snapshot")))
            for method, url, headers, body in requests:
                out.write(frame(self.record(method, url, headers, body)))
            out.write(frame({"k": "end", "requests": len(requests)}))
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(final)
        fsync_dir(self.directory)
        for kind in ("snapshot", "journal"):
            for older, path in iter_files(self.directory, kind):
                if older < self.generation:
                    path.unlink()

    @staticmethod
    def record(method: str, url: str, headers: Any, body: bytes) -> dict[str, Any]:
        return {
            "k": "request",
            "m": method,
            "u": url,
            "h": {str(k): _text(v) for k, v in headers.items()},
            "b": base64.b64encode(body).decode(),
        }

    def append(self, method: str, url: str, headers: Any, body: bytes) -> int:
        assert self.writer is not None
        return self.writer.append(self.record(method, url, headers, body))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def install(persistence: ServicePersistence) -> Callable[[], None]:
    """Journal every changing S3 and Secrets Manager request moto serves in this process; returns the undo."""
    from moto.core.botocore_stubber import BotocoreStubber

    from skyloop.local._patch import replace

    original = BotocoreStubber.process_request

    def process_request(self: Any, request: Any) -> Any:
        if not changes_state(request.method, request.url, request.headers):
            return original(self, request)
        body = request.body
        if hasattr(body, "read"):  # a streaming upload: read once, kept for moto and the journal
            body = body.read()
            request.body = body
        data = body.encode() if isinstance(body, str) else bytes(body or b"")
        with persistence.lock:
            response = original(self, request)
            status = int(response[0]) if response is not None else 500
            position = (
                persistence.append(request.method, request.url, request.headers, data)
                if status < 300
                else None
            )
        if position is not None:
            assert persistence.writer is not None
            try:
                persistence.writer.wait(position)
            except Exception as exc:  # the change happened but is not durable: say so, never a 2xx
                log.error("%s", exc)
                return 500, {}, f"the local stack could not write its data directory: {exc}".encode()
        return response

    replace(BotocoreStubber, "process_request", process_request)

    def undo() -> None:
        replace(BotocoreStubber, "process_request", original)
        persistence.close()

    return undo


def export_state(clients: Callable[[str], Any]) -> list[tuple[str, str, dict[str, str], bytes]]:
    """Every bucket, object and secret as the requests that create them (what a snapshot keeps).

    The requests are built by boto3 clients whose sending is replaced by
    capture, so they are exactly what a client sends and what moto serves on load.
    """
    captured: list[tuple[str, str, dict[str, str], bytes]] = []

    def capture(request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse, HeadersDict

        from skyloop.local.aws_shortcut import BufferedBody

        body = request.body.read() if hasattr(request.body, "read") else request.body
        data = body.encode() if isinstance(body, str) else bytes(body or b"")
        captured.append(
            (request.method, request.url, {str(k): _text(v) for k, v in request.headers.items()}, data)
        )
        return AWSResponse(request.url, 200, HeadersDict({}), BufferedBody(b"{}"))

    import boto3

    s3, secrets = clients("s3"), clients("secretsmanager")
    session = boto3.session.Session()  # clients of their own: their sends are captured, never served
    s3_writer = session.client("s3", region_name=s3.meta.region_name)
    secrets_writer = session.client("secretsmanager", region_name=secrets.meta.region_name)
    for client in (s3_writer, secrets_writer):
        client.meta.events.register_first("before-send", capture)
    for bucket in s3.list_buckets().get("Buckets", []):
        name = bucket["Name"]
        s3_writer.create_bucket(Bucket=name)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for entry in page.get("Contents", []):
                obj = s3.get_object(Bucket=name, Key=entry["Key"])
                s3_writer.put_object(
                    Bucket=name,
                    Key=entry["Key"],
                    Body=obj["Body"].read(),
                    ContentType=obj.get("ContentType") or "binary/octet-stream",
                    Metadata=obj.get("Metadata") or {},
                )
    for page in secrets.get_paginator("list_secrets").paginate():
        for entry in page.get("SecretList", []):
            value = secrets.get_secret_value(SecretId=entry["ARN"])
            kwargs: dict[str, Any] = {"Name": entry["Name"]}
            if "SecretString" in value:
                kwargs["SecretString"] = value["SecretString"]
            else:
                kwargs["SecretBinary"] = value["SecretBinary"]
            secrets_writer.create_secret(**kwargs)
    return captured
