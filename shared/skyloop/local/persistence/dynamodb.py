"""The local stack's DynamoDB tables on disk: a journal of item images, and snapshots taken while serving.

Kept by the process that hosts moto's DynamoDB (the ``sl-dynamodb`` process,
or the stack's own with ``SKYLOOP_LOCAL_DYNAMODB=inline``), where every
request is served under one lock (:mod:`skyloop.local.moto_dynamodb`):

* **What is journaled.** As a request ends, still under the lock, the new
  image of every item it touched (or its deletion), and the definition of a
  table it created, changed or deleted, as one record. A transaction is one
  record, so it is loaded whole or not at all. Images rather than requests:
  putting an image twice is the same as once, which is what lets a snapshot
  be taken while requests go on (below), and loading an image is a plain put
  (no condition or update expression runs again).
* **When a request is answered.** After the lock is released, the request
  waits until its record is on disk (group commit: one ``fdatasync`` for all
  the requests that wait together). A read waits too, for every record
  appended before it, so nothing a client has seen can be lost by a crash.
* **Snapshots.** When the journals since the last snapshot pass
  ``SKYLOOP_SNAPSHOT_BYTES`` (64 MiB), the journal moves to a new generation
  and every item is written to ``snapshot.<generation>`` a few partitions at a
  time, each under the lock for a moment; requests are served meanwhile. Each
  item's image in the snapshot is from some moment after the rotation, and
  every change after the rotation is in the new journal, so loading the
  snapshot and then that journal gives exactly the last state. The snapshot
  is written to a temporary name, synced and renamed; only then are the older
  files deleted.
* **Loading.** The newest complete snapshot, then every later journal in
  order. Records that cannot be read are skipped and reported (the file is
  copied under ``damaged/``); a last record cut short was never acknowledged
  and is dropped with a note.

Tables are recreated as they were defined; the stack's bootstrap then adds
any index a newer version of the schema has (see :mod:`skyloop.local.resources`).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from skyloop.local.persistence.datadir import LoadReport, keep_damaged
from skyloop.local.persistence.journal import (
    JournalWriter,
    file_name,
    frame,
    fsync_dir,
    iter_files,
    read_records,
)

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger("skyloop.local")

# A DynamoDB request carrying this header is not answered later for the sake of the journal: what it
# changed is journaled in order as always and synced by the journal's own thread within moments. The
# local Lambda environments of the turn steps send it (lambda_worker): their writes are the turn's
# internal progress, answered to no client; every request that does answer a client (the API function,
# the stream's reads, the moto endpoint) still waits until everything journaled before it is on disk,
# so a client never sees, and is never told of, anything a crash could take back.
DEFER_HEADER = "X-Skyloop-Sync"
DEFERRED = "deferred"
DEFERRED_SYNC_FUNCTIONS = frozenset({"turn", "run_tool"})
SNAPSHOT_BYTES = int(os.environ.get("SKYLOOP_SNAPSHOT_BYTES", str(64 * 1024 * 1024)))
MAX_JOURNALS = 16  # journal files (one per start) before a start takes a snapshot anyway
CHUNK_PARTITIONS = 64  # partitions written per hold of the lock while a snapshot is taken
KIND = "dynamodb"


def _backends() -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends


def table_definition(table: Any) -> dict[str, Any]:
    """The ``CreateTable`` request that makes ``table`` again (keys, indexes, billing, stream)."""
    described = table.describe()["TableDescription"]
    billing = (described.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED")
    out: dict[str, Any] = {
        "TableName": described["TableName"],
        "KeySchema": described["KeySchema"],
        "AttributeDefinitions": described["AttributeDefinitions"],
        "BillingMode": billing,
    }
    provisioned = billing != "PAY_PER_REQUEST"
    if provisioned:
        throughput = described.get("ProvisionedThroughput") or {}
        out["ProvisionedThroughput"] = {
            "ReadCapacityUnits": max(1, int(throughput.get("ReadCapacityUnits") or 1)),
            "WriteCapacityUnits": max(1, int(throughput.get("WriteCapacityUnits") or 1)),
        }
    for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        indexes = []
        for index in described.get(kind) or []:
            entry = {k: index[k] for k in ("IndexName", "KeySchema", "Projection")}
            if provisioned and kind == "GlobalSecondaryIndexes":
                entry["ProvisionedThroughput"] = out["ProvisionedThroughput"]
            indexes.append(entry)
        if indexes:
            out[kind] = indexes
    stream = described.get("StreamSpecification")
    if stream and stream.get("StreamEnabled"):
        out["StreamSpecification"] = stream
    return out


def _key_attrs(table: Any, hash_key: Any, range_key: Any) -> dict[str, Any]:
    key = {table.hash_key_attr: hash_key.to_json()}
    if range_key is not None and table.range_key_attr is not None:
        key[table.range_key_attr] = range_key.to_json()
    return key


class TablePersistence:
    """The DynamoDB half of a data directory (see the module docstring).

    Args:
        directory: ``<data dir>/dynamodb``.
        data_root: the data directory (damaged files are copied under it).
        dispatch: serves one AWS request in this process (``lambda_runtime.dispatch_aws``).
    """

    def __init__(self, directory: Path, data_root: Path, dispatch: Any) -> None:
        self.directory = directory
        self.data_root = data_root
        self.dispatch = dispatch
        self.writer: JournalWriter | None = None
        self.generation = 0
        self._touched: dict[tuple[int, Any, Any], tuple[Any, Any, Any]] = {}
        self._tables: set[tuple[str, str, str]] = set()  # (account, region, name) changed by a request
        self._snapshotting = threading.Lock()
        self._lock: Any = None  # moto_dynamodb's lock, taken by a snapshot chunk by chunk
        self.snapshots = 0
        self.pending_bytes = 0  # journal bytes a load replayed (what a snapshot would save the next one)
        self.pending_files = 0
        self.lock_handle: Any = None  # the directory's lock file, held as long as this lives

    # ------------------------------------------------------------------ loading
    def load(self) -> LoadReport:
        """Make moto's DynamoDB what the directory says (before anything else reaches it).

        The newest snapshot, then every journal from its generation on. A
        snapshot is renamed into place only once complete and synced, so one
        without its end record, like any unreadable record, is damage: what is
        readable is loaded and the rest reported.
        """
        report = LoadReport(KIND)
        for stale in self.directory.glob("*.tmp"):  # a snapshot that was never finished
            stale.unlink()
        snapshots = list(iter_files(self.directory, "snapshot"))
        journals = list(iter_files(self.directory, "journal"))
        start = 0
        if snapshots:
            start, path = snapshots[-1]
            records, damage = read_records(path)
            complete = bool(records) and records[-1].get("k") == "end"
            self._apply_all(records, report)
            damage.missing_end = not complete
            if damage.damaged:
                report.damage.append(damage)
                report.kept.append(keep_damaged(self.data_root, path))
        self.pending_bytes = 0
        for generation, path in journals:
            if generation < start:
                continue
            records, damage = read_records(path)
            self._apply_all(records, report)
            if damage.damaged:
                report.damage.append(damage)
                report.kept.append(keep_damaged(self.data_root, path))
            elif damage.incomplete_tail:
                report.notes.append(damage.describe())
                os.truncate(path, path.stat().st_size - damage.incomplete_tail)
            self.pending_bytes += path.stat().st_size
            self.pending_files += 1
        self.generation = max([g for g, _ in snapshots + journals], default=0) + 1
        return report

    def _apply_all(self, records: list[dict[str, Any]], report: LoadReport) -> None:
        for record in records:
            report.records += 1
            try:
                report.items += self._apply(record)
            except Exception as exc:  # a record moto refuses (e.g. an item that no longer fits)
                report.notes.append(f"could not load a {record.get('k')!r} record: {exc}")

    def _apply(self, record: dict[str, Any]) -> int:
        kind = record.get("k")
        if kind == "table":
            self._create_table(record)
        elif kind == "drop":
            backend = _backends()[record["account"]][record["region"]]
            if record["name"] in backend.tables:
                backend.delete_table(record["name"])
        elif kind == "items":
            return self._apply_items(record)
        return 0

    def _create_table(self, record: dict[str, Any]) -> None:
        backend = _backends()[record["account"]][record["region"]]
        name = record["create"]["TableName"]
        if name in backend.tables:
            if table_definition(backend.tables[name]) == record["create"]:
                return
            backend.delete_table(name)  # redefined later on: the items that follow are its items
        self._call(record["region"], "CreateTable", record["create"])
        ttl = record.get("ttl")
        if ttl:
            spec = {"Enabled": True, "AttributeName": ttl}
            self._call(
                record["region"], "UpdateTimeToLive", {"TableName": name, "TimeToLiveSpecification": spec}
            )

    def _apply_items(self, record: dict[str, Any]) -> int:
        from moto.dynamodb.models.dynamo_type import DynamoType

        backend = _backends()[record["account"]][record["region"]]
        table = backend.tables.get(record["t"])
        if table is None:
            raise ValueError(f"items of table {record['t']!r}, which the data directory does not define")
        for attrs in record.get("p", ()):
            table.put_item(attrs)
        for key in record.get("d", ()):
            hash_key = DynamoType(key[table.hash_key_attr])
            range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
            table.delete_item(hash_key, range_key)
        return len(record.get("p", ()))

    def _call(self, region: str, operation: str, body: dict[str, Any]) -> Any:
        headers = [
            ("X-Amz-Target", f"DynamoDB_20120810.{operation}"),
            ("Content-Type", "application/x-amz-json-1.0"),
        ]
        url = f"https://dynamodb.{region}.amazonaws.com/"
        status, _, out = self.dispatch("POST", url, headers, json.dumps(body).encode())
        if status >= 300:
            raise RuntimeError(f"{operation} failed while loading the data directory: {out[:300]!r}")
        return json.loads(out or b"{}")

    # ------------------------------------------------------------------ serving
    def start(self, lock: Any) -> None:
        """Open the next journal generation; from now on every change is journaled."""
        self._lock = lock
        self.writer = JournalWriter(
            self.directory / file_name("journal", self.generation), self._header("journal", self.generation)
        )
        self.writer.bytes_since_snapshot = self.pending_bytes
        if self.pending_bytes > SNAPSHOT_BYTES or self.pending_files > MAX_JOURNALS:
            threading.Thread(target=self._snapshot_quietly, name="dynamodb-snapshot", daemon=True).start()

    def _header(self, kind: str, generation: int) -> dict[str, Any]:
        from skyloop.local.persistence.datadir import FORMAT

        return {"k": "header", "format": FORMAT, "file": f"dynamodb-{kind}", "generation": generation}

    def touched(self, table: Any, hash_key: Any, range_key: Any) -> None:
        """An item of ``table`` was put, updated or deleted by the current request (under the lock)."""
        self._touched[(id(table), hash_key, range_key)] = (table, hash_key, range_key)

    def table_changed(self, account: str, region: str, name: str) -> None:
        self._tables.add((account, region, name))

    def end_request(self, deferred: bool = False) -> int | None:
        """Under the lock: journal what the request changed; returns the position to wait for.

        ``deferred`` (see :data:`DEFER_HEADER`): nothing to wait for; the journal's thread syncs it.
        """
        writer = self.writer
        if writer is None:
            self._touched.clear()
            self._tables.clear()
            return None
        if self._tables:
            for account, region, name in sorted(self._tables):
                writer.append(self._table_record(account, region, name))
            self._tables.clear()
        if self._touched:
            for record in self._item_records(self._touched.values()):
                writer.append(record)
            self._touched.clear()
        if deferred:
            writer.kick()
            return None
        return writer.position

    def wait(self, ticket: int) -> None:
        writer = self.writer
        if writer is None:
            return
        writer.wait(ticket)
        if writer.bytes_since_snapshot > SNAPSHOT_BYTES and not self._snapshotting.locked():
            threading.Thread(target=self._snapshot_quietly, name="dynamodb-snapshot", daemon=True).start()

    def _table_record(self, account: str, region: str, name: str) -> dict[str, Any]:
        table = _backends()[account][region].tables.get(name)
        if table is None:
            return {"k": "drop", "account": account, "region": region, "name": name}
        ttl = table.ttl.get("AttributeName") if table.ttl.get("TimeToLiveStatus") == "ENABLED" else None
        return {
            "k": "table",
            "account": account,
            "region": region,
            "create": table_definition(table),
            "ttl": ttl,
        }

    def _item_records(self, touched: Any) -> list[dict[str, Any]]:
        from skyloop.local.moto_dynamodb import _plain_result

        by_table: dict[int, dict[str, Any]] = {}
        for table, hash_key, range_key in touched:
            record = by_table.get(id(table))
            if record is None:
                record = by_table[id(table)] = {
                    "k": "items",
                    "account": table.account_id,
                    "region": table.region_name,
                    "t": table.name,
                    "p": [],
                    "d": [],
                }
            item = (
                table.get_item(hash_key, range_key)
                if range_key is not None or not table.range_key_attr
                else None
            )
            if item is None:
                record["d"].append(_key_attrs(table, hash_key, range_key))
            else:
                record["p"].append(_plain_result(item.attrs))
        return list(by_table.values())

    # ---------------------------------------------------------------- snapshots
    def _snapshot_quietly(self) -> None:
        try:
            self.snapshot()
        except Exception:
            log.exception("could not write a snapshot of the local tables; the journal keeps everything")

    def snapshot(self) -> None:
        """Write every table and item to a new snapshot while requests go on; then drop older files."""
        if self.writer is None or self._lock is None:
            raise RuntimeError("the DynamoDB data directory is not serving")
        with self._snapshotting:
            with self._lock:
                generation = self.generation = self.generation + 1
                self.writer.rotate(
                    self.directory / file_name("journal", generation), self._header("journal", generation)
                )
                tables = [
                    (account, region, table)
                    for account, regions in _backends().items()
                    for region, backend in regions.items()
                    for table in list(backend.tables.values())
                ]
                head = [self._table_record(a, r, t.name) for a, r, t in tables]
            final = self.directory / file_name("snapshot", generation)
            tmp = final.with_name(final.name + ".tmp")
            count = 0
            with open(tmp, "wb") as out:
                out.write(frame(self._header("snapshot", generation)))
                for record in head:
                    out.write(frame(record))
                for _account, _region, table in tables:
                    count += self._write_items(out, table)
                out.write(frame({"k": "end", "items": count, "tables": len(tables)}))
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(final)
            fsync_dir(self.directory)
            for kind in ("snapshot", "journal"):
                for older, path in iter_files(self.directory, kind):
                    if older < generation:
                        path.unlink()
            self.snapshots += 1

    def _write_items(self, out: Any, table: Any) -> int:
        from skyloop.local.moto_dynamodb import _plain_result

        with self._lock:
            partitions = list(table.items.keys())
        count = 0
        for start in range(0, len(partitions), CHUNK_PARTITIONS):
            images: list[dict[str, Any]] = []
            with self._lock:
                for hash_key in partitions[start : start + CHUNK_PARTITIONS]:
                    value = table.items.get(hash_key)
                    if value is None:
                        continue
                    found = list(value.values()) if isinstance(value, dict) else [value]
                    images.extend(_plain_result(item.attrs) for item in found)
            if images:
                record = {
                    "k": "items",
                    "account": table.account_id,
                    "region": table.region_name,
                    "t": table.name,
                    "p": images,
                    "d": [],
                }
                out.write(frame(record))
                count += len(images)
        return count

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def install(persistence: TablePersistence) -> Any:
    """Journal every change moto's DynamoDB makes in this process from now on; returns the undo."""
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    from skyloop.local import moto_dynamodb
    from skyloop.local._patch import replace

    put_item, delete_item = Table.put_item, Table.delete_item
    update_item = DynamoDBBackend.update_item
    create_table, delete_table = DynamoDBBackend.create_table, DynamoDBBackend.delete_table
    update_table, update_ttl = DynamoDBBackend.update_table, DynamoDBBackend.update_time_to_live

    def put(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = put_item(self, *args, **kwargs)
        persistence.touched(self, item.hash_key, item.range_key)
        return item

    def delete(self: Any, hash_key: Any, range_key: Any = None) -> Any:
        item = delete_item(self, hash_key, range_key)
        if item is not None:
            persistence.touched(self, hash_key, range_key)
        return item

    def update(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
        item = update_item(self, table_name, *args, **kwargs)
        persistence.touched(self.get_table(table_name), item.hash_key, item.range_key)
        return item

    def control(original: Any) -> Any:
        def run(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
            result = original(self, name, *args, **kwargs)
            persistence.table_changed(self.account_id, self.region_name, name)
            table = self.tables.get(name)
            if table is not None and hasattr(table, "_skyloop_gsi"):
                table._skyloop_gsi = None  # indexes may have changed: moto_dynamodb rebuilds its value index
            return result

        return run

    patches: list[tuple[Any, str, Any]] = [
        (Table, "put_item", put),
        (Table, "delete_item", delete),
        (DynamoDBBackend, "update_item", update),
        (DynamoDBBackend, "create_table", control(create_table)),
        (DynamoDBBackend, "delete_table", control(delete_table)),
        (DynamoDBBackend, "update_table", control(update_table)),
        (DynamoDBBackend, "update_time_to_live", control(update_ttl)),
    ]
    previous = [(owner, name, replace(owner, name, value)) for owner, name, value in patches]
    persistence.start(moto_dynamodb._lock)
    stop_observing = moto_dynamodb.observe(persistence)

    def undo() -> None:
        stop_observing()
        for owner, name, value in reversed(previous):
            replace(owner, name, value)
        persistence.close()

    return undo
