"""Session files through the API function on moto: the bytes in S3, the metadata in the table.

Limits are lowered through the environment so the boundary cases are cheap:
at each limit an upload passes, one past it is 413 with the code naming that
limit, and a refused upload writes nothing (no row, no object).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from skyloop import deps
from skyloop.api.responses import SessionFileList, SessionFileResource
from skyloop.store import keys

if TYPE_CHECKING:
    from collections.abc import Iterator

    from skyloop.models.session import Session
    from tests.integration.conftest import Api, ApiResponse, MockLLM, Stack


@pytest.fixture
def small_limits() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SKYLOOP_FILE_MAX_BYTES", "16")
        mp.setenv("SKYLOOP_SESSION_FILES_MAX", "3")
        mp.setenv("SKYLOOP_SESSION_FILES_MAX_BYTES", "40")
        deps.get_settings.cache_clear()
        yield
    deps.get_settings.cache_clear()


@pytest.fixture
def session(aws: Stack, mock_llm: MockLLM) -> Session:
    return aws.new_session(mock_llm.script())


def _files(sid: str) -> str:
    return f"/v1/sessions/{sid}/resources/files"


def _upload(api: Api, sid: str, name: str, data: bytes, ctype: str = "text/plain") -> ApiResponse:
    return api.post_multipart(_files(sid), {"file": (name, data, ctype)}, {})


def _objects(aws: Stack, sid: str) -> list[str]:
    s3 = deps.client("s3")
    listed = s3.list_objects_v2(Bucket=aws.resources.blob_bucket, Prefix=keys.session_blob_prefix(sid))
    return [o["Key"] for o in listed.get("Contents", [])]


def _file_rows(aws: Stack, sid: str) -> list[str]:
    return sorted(sk for sk in aws.rows(sid) if sk.startswith(keys.FILE_PREFIX))


def test_upload_list_read_download_delete(aws: Stack, api: Api, session: Session) -> None:
    data = b"col1,col2\n1,2\n"
    # When a file is uploaded as multipart field 'file'
    r = _upload(api, session.id, "table.csv", data, "text/csv; charset=utf-8")
    # Then it is a session.resource of type file, its bytes in the bucket, its row in the table
    assert r.status == 201, r.body
    resource = SessionFileResource.model_validate(r.body)
    assert (resource.name, resource.metadata.bytes, resource.metadata.content_type) == (
        "table.csv",
        14,
        "text/csv",
    )
    assert resource.metadata.sha256 == hashlib.sha256(data).hexdigest()
    assert _objects(aws, session.id) == [keys.file_blob_key(session.id, resource.id)]
    assert _file_rows(aws, session.id) == [f"FILE#{resource.id}"]
    # And it is listed, described and downloadable
    listed = SessionFileList.model_validate(api.get(_files(session.id)).body)
    assert [f.id for f in listed.data] == [resource.id]
    assert api.get(f"{_files(session.id)}/{resource.id}").body == r.body
    download = api.get(f"{_files(session.id)}/{resource.id}/content")
    assert download.status == 200
    assert download.body == data.decode()
    assert download.headers["content-type"] == "text/csv"
    assert download.headers["content-disposition"].startswith('attachment; filename="table.csv"')
    assert download.headers["x-content-type-options"] == "nosniff"
    # When it is deleted: 200 once, then 404 everywhere, and the bytes are gone
    gone = api.call("DELETE", f"{_files(session.id)}/{resource.id}")
    assert gone.body == {"id": resource.id, "object": "session.resource.deleted", "deleted": True}
    assert api.call("DELETE", f"{_files(session.id)}/{resource.id}").status == 404
    assert api.get(f"{_files(session.id)}/{resource.id}").status == 404
    assert api.get(f"{_files(session.id)}/{resource.id}/content").status == 404
    assert api.get(_files(session.id)).body["data"] == []
    assert _objects(aws, session.id) == []


def test_a_raw_body_upload_names_its_file_in_the_query(aws: Stack, api: Api, session: Session) -> None:
    data = bytes(range(128))  # binary, yet readable back through the test client's text decoding
    r = api.call(
        "POST",
        _files(session.id),
        query={"filename": "blob.bin"},
        headers={"content-type": "application/octet-stream"},
        body=data,
        base64_body=True,
    )
    assert r.status == 201, r.body
    assert r.body["metadata"]["content_type"] == "application/octet-stream"
    out = api.call("GET", f"{_files(session.id)}/{r.body['id']}/content")
    assert out.status == 200
    assert out.body == data.decode()  # the resolver sent the bytes base64-encoded, as API Gateway needs


@pytest.mark.parametrize(
    "name",
    [
        "",
        "../etc/passwd",
        "a/b.txt",
        "a\\b.txt",
        ".",
        "..",
        " lead.txt",
        "nul\x00.txt",
        "tab\t.txt",
        "x" * 256,
    ],
)
def test_a_bad_filename_is_400_and_writes_nothing(aws: Stack, api: Api, session: Session, name: str) -> None:
    r = api.call(
        "POST",
        _files(session.id),
        query={"filename": name},
        headers={"content-type": "text/plain"},
        body="hi",
    )
    assert r.status == 400, r.body
    assert r.error()["param"] == "filename"
    assert _file_rows(aws, session.id) == []
    assert _objects(aws, session.id) == []


def test_multipart_without_a_file_field_is_400(api: Api, session: Session) -> None:
    r = api.post_multipart(_files(session.id), {"upload": ("a.txt", b"x", "text/plain")}, {})
    assert r.status == 400
    assert r.error()["param"] == "file"


@pytest.mark.parametrize(
    ("sizes", "last", "code"),
    [
        ([], 16, None),  # a file at the per-file limit
        ([], 17, "file_too_large"),  # one byte past it
        ([1, 1], 1, None),  # the third file: at the count limit
        ([1, 1, 1], 1, "session_file_count_exceeded"),  # a fourth
        ([16, 16], 8, None),  # exactly the session's bytes
        ([16, 16], 9, "session_file_bytes_exceeded"),  # one byte past them
    ],
)
def test_file_limits_at_the_limit_pass_and_one_past_is_413(
    aws: Stack, api: Api, session: Session, small_limits: None, sizes: list[int], last: int, code: str | None
) -> None:
    for i, size in enumerate(sizes):
        assert _upload(api, session.id, f"f{i}.txt", b"a" * size).status == 201
    rows, objects = _file_rows(aws, session.id), _objects(aws, session.id)
    r = _upload(api, session.id, "last.txt", b"b" * last)
    if code is None:
        assert r.status == 201, r.body
        return
    assert r.status == 413, r.body
    assert r.error()["code"] == code
    assert (_file_rows(aws, session.id), _objects(aws, session.id)) == (rows, objects)


def test_deleting_the_session_deletes_its_files(aws: Stack, api: Api, session: Session) -> None:
    fid = _upload(api, session.id, "a.txt", b"abc").body["id"]
    assert _objects(aws, session.id)
    assert api.call("DELETE", f"/v1/sessions/{session.id}").status == 200
    assert _objects(aws, session.id) == []
    assert aws.rows(session.id) == {}
    assert api.get(f"{_files(session.id)}/{fid}").status == 404


def test_file_ids_of_another_session_or_unknown_are_404(aws: Stack, api: Api, mock_llm: MockLLM) -> None:
    first, second = aws.new_session(mock_llm.script()), aws.new_session(mock_llm.script())
    fid = _upload(api, first.id, "a.txt", b"abc").body["id"]
    for path in (
        f"{_files(second.id)}/{fid}",
        f"{_files(first.id)}/{uuid.uuid4().hex}",
        f"{_files(first.id)}/x",
    ):
        r: Any = api.get(path)
        assert r.status == 404, path
        assert r.error()["code"] == "not_found"
    assert api.call("DELETE", f"{_files(second.id)}/{fid}").status == 404
    assert api.get(f"{_files(first.id)}/{fid}").status == 200
