"""The data directory's record files: framing, damage-tolerant reading, group commit, a disk that fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from typing import TYPE_CHECKING

from skyloop.local.persistence.journal import MAGIC, JournalWriter, frame, read_records

if TYPE_CHECKING:
    from pathlib import Path

HEADER = {"k": "header", "format": 1}


def records(n: int) -> list[dict[str, object]]:
    return [{"k": "items", "n": i, "text": f"record {i} " * (i % 5)} for i in range(n)]


def test_records_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    path.write_bytes(b"".join(frame(r) for r in records(50)))
    got, damage = read_records(path)
    assert got == records(50)
    assert not damage.damaged
    assert damage.incomplete_tail == 0


def test_a_damaged_record_is_skipped_and_the_rest_is_read(tmp_path: Path) -> None:
    # Given 10 records, the payload of the fourth damaged (its CRC no longer matches)
    framed = [frame(r) for r in records(10)]
    start = sum(len(f) for f in framed[:3])
    data = bytearray(b"".join(framed))
    data[start + 14] ^= 0xFF
    path = tmp_path / "journal"
    path.write_bytes(bytes(data))

    # When it is read
    got, damage = read_records(path)

    # Then every other record is there and the damaged bytes are reported exactly
    assert [r["n"] for r in got] == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert damage.unreadable == [(start, start + len(framed[3]))]
    assert damage.damaged
    assert "unreadable bytes" in damage.describe()


def test_garbage_with_a_fake_magic_inside_is_skipped(tmp_path: Path) -> None:
    framed = [frame(r) for r in records(4)]
    junk = b"xx" + MAGIC + b"\x00\x00\x00\x05\x00\x00\x00\x00hello" + b"yy"
    path = tmp_path / "journal"
    path.write_bytes(framed[0] + framed[1] + junk + framed[2] + framed[3])
    got, damage = read_records(path)
    assert [r["n"] for r in got] == [0, 1, 2, 3]
    assert damage.unreadable == [(len(framed[0] + framed[1]), len(framed[0] + framed[1] + junk))]


def test_a_last_record_cut_short_is_an_incomplete_write_not_damage(tmp_path: Path) -> None:
    framed = [frame(r) for r in records(3)]
    for cut in (3, 10, len(framed[2]) - 1):  # inside the magic, the header, the payload
        path = tmp_path / f"journal-{cut}"
        path.write_bytes(framed[0] + framed[1] + framed[2][:cut])
        got, damage = read_records(path)
        assert [r["n"] for r in got] == [0, 1]
        assert not damage.damaged
        assert damage.incomplete_tail == cut


def test_concurrent_appends_are_kept_in_order_and_synced_in_groups(tmp_path: Path) -> None:
    # Given a writer and 8 threads, each appending under one lock (as the table's requests do)
    writer = JournalWriter(tmp_path / "journal", HEADER)
    lock = threading.Lock()
    order: list[int] = []

    def work(worker: int) -> None:
        for i in range(50):
            with lock:
                n = worker * 1000 + i
                position = writer.append({"k": "items", "n": n})
                order.append(n)
            writer.wait(position)
            assert writer._durable >= position  # answered only once its record is on disk

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()

    # Then the file holds every record in the order applied, and fewer syncs than writes were needed
    got, damage = read_records(tmp_path / "journal")
    assert [r["n"] for r in got[1:]] == order
    assert got[0] == HEADER
    assert not damage.damaged
    assert 1 <= writer.syncs < 400


def test_rotation_keeps_positions_and_moves_to_the_new_file(tmp_path: Path) -> None:
    writer = JournalWriter(tmp_path / "journal.1", HEADER)
    writer.wait(writer.append({"n": 1}))
    writer.append({"n": 2})
    writer.rotate(tmp_path / "journal.2", {**HEADER, "generation": 2})
    position = writer.append({"n": 3})
    writer.wait(position)
    writer.close()
    assert [r.get("n") for r in read_records(tmp_path / "journal.1")[0]] == [None, 1, 2]
    assert [r.get("n") for r in read_records(tmp_path / "journal.2")[0]] == [None, 3]


def test_a_write_that_fails_is_never_acknowledged(tmp_path: Path) -> None:
    # Given a process whose files may not grow past 64 KiB (the disk "fills up")
    script = textwrap.dedent(
        f"""
        import resource, signal
        from pathlib import Path
        from skyloop.local.persistence.journal import JournalError, JournalWriter
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        writer = JournalWriter(Path({str(tmp_path / "journal")!r}), {{"k": "header"}})
        acknowledged = 0
        try:
            for i in range(1000):
                writer.wait(writer.append({{"k": "items", "pad": "x" * 1000, "n": i}}))
                acknowledged += 1
        except JournalError as exc:
            print("refused", acknowledged, exc)
        try:
            writer.wait(writer.append({{"k": "items", "n": -1}}))
            print("acknowledged after a failure")
        except JournalError:
            print("still refused")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr

    # Then the writes past the limit are refused, and so is every later one
    first, second = done.stdout.strip().splitlines()
    assert first.startswith("refused ")
    acknowledged = int(first.split()[1])
    assert 0 < acknowledged < 1000
    assert second == "still refused"

    # And every acknowledged write is in the file
    got, _ = read_records(tmp_path / "journal")
    assert [r["n"] for r in got[1:]][:acknowledged] == list(range(acknowledged))
