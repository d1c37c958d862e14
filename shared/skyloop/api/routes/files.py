"""``/v1/sessions/{id}/resources/files``: upload (multipart ``file`` or a raw body), list, read, download, delete;
``/v1/sessions/{id}/workspace``: the files of the session's hosted workspace (:mod:`skyloop.environments`),
listed and downloaded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from skyloop import deps, session_files, sessions
from skyloop.api import openapi
from skyloop.api.body import query
from skyloop.api.requests import FileListQuery, FileUploadQuery, WorkspaceFileQuery, WorkspaceListQuery
from skyloop.api.responses import SessionFileDeleted, SessionFileList, SessionFileResource
from skyloop.api.routes._common import current_event, json_response, page, request
from skyloop.errors import InvalidInputError, NotFoundError

if TYPE_CHECKING:
    from skyloop.models.session import SessionFile

router = Router()
FILES = "/v1/sessions/<session_id>/resources/files"
CACHE_CONTROL = "private, max-age=31536000, immutable"  # a file id names one set of bytes forever


@openapi.operation(
    router,
    "POST",
    FILES,
    summary="Upload a file into the session (multipart field 'file', or the raw body with ?filename=)",
    status=201,
    upload=True,
    response=SessionFileResource,
)
def upload_file(session_id: str) -> Response:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    req = request(router)
    if req.is_multipart():
        from skyloop import bundles

        form = bundles.parse_multipart_form(req.raw(), req.content_type)
        part = form.files.get("file")
        if part is None:
            raise InvalidInputError(
                "multipart field 'file' (the file, with a filename) is required", param="file"
            )
        filename, data, declared = part.filename, part.data, part.content_type
    else:
        filename = query(current_event(router), FileUploadQuery).filename
        data, declared = req.raw(), req.content_type
    stored = session_files.upload(
        store, session, deps.get_settings(), filename=filename, data=data, declared=declared
    )
    return json_response(201, stored.to_api())


@openapi.operation(
    router,
    "GET",
    FILES,
    summary="The session's files, newest first",
    query=FileListQuery,
    response=SessionFileList,
)
def list_files(session_id: str) -> Response:
    store = deps.store()
    q = query(current_event(router), FileListQuery)
    session = sessions.get_session(store, session_id)
    files: list[SessionFile] = store.list_files(session.id)
    if q.order == "desc":
        files.reverse()
    if q.after:
        ids = [f.id for f in files]
        if q.after not in ids:
            raise InvalidInputError(f"cursor file '{q.after}' is not in this session", param="after")
        files = files[ids.index(q.after) + 1 :]
    return json_response(200, page([f.to_api() for f in files[: q.limit]], len(files) > q.limit))


@openapi.operation(
    router, "GET", FILES + "/<file_id>", summary="A session file's metadata", response=SessionFileResource
)
def get_file(session_id: str, file_id: str) -> Response:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    return json_response(200, session_files.get(store, session, file_id).to_api())


@openapi.operation(
    router, "GET", FILES + "/<file_id>/content", summary="A session file's bytes (as a download)", binary=True
)
def download_file(session_id: str, file_id: str) -> Response:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    found = session_files.get(store, session, file_id)
    etag = f'"{found.sha256}"'
    headers = {
        "Content-Disposition": session_files.attachment_disposition(found.filename),
        "X-Content-Type-Options": "nosniff",
        "ETag": etag,
        "Cache-Control": CACHE_CONTROL,
    }
    if_none_match = current_event(router).headers.get("if-none-match") or ""
    if etag in [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]:
        return Response(status_code=304, headers=headers, body="")
    return Response(
        status_code=200, content_type=found.content_type, body=store.read_file(found), headers=headers
    )


@openapi.operation(
    router,
    "DELETE",
    FILES + "/<file_id>",
    summary="Delete a session file and its bytes",
    response=SessionFileDeleted,
)
def delete_file(session_id: str, file_id: str) -> Response:
    store = deps.store()
    session = sessions.get_session(store, session_id)
    removed = session_files.delete(store, session, file_id)
    return json_response(200, {"id": removed.id, "object": "session.resource.deleted", "deleted": True})


# ------------------------------------------------------------------------------ hosted workspace
WORKSPACE = "/v1/sessions/<session_id>/workspace"


@openapi.operation(
    router,
    "GET",
    WORKSPACE,
    summary="The files of the session's hosted workspace (/workspace), with sizes; under ?path= only",
    query=WorkspaceListQuery,
)
def list_workspace(session_id: str) -> Response:
    from skyloop import workspace as paths
    from skyloop.environments import service

    store = deps.store()
    session = sessions.get_session(store, session_id)
    q = query(current_event(router), WorkspaceListQuery)
    try:
        prefix = paths.relative(q.path)
    except paths.PathOutsideWorkspace as exc:
        raise InvalidInputError(str(exc), param="path") from None
    entries = [
        e
        for e in service.engine().entries(session.id)
        if not prefix or e.path == prefix or e.path.startswith(prefix + "/")
    ]
    data = [
        {
            "path": f"{paths.WORKSPACE}/{e.path}",
            "type": e.type,
            "bytes": e.bytes,
            "modified_at": int(e.modified_at),
        }
        for e in entries
    ]
    return json_response(
        200,
        {
            "object": "list",
            "root": paths.WORKSPACE,
            "data": data,
            "total_bytes": sum(e.bytes for e in entries),
        },
    )


@openapi.operation(
    router,
    "GET",
    WORKSPACE + "/content",
    summary="One file of the session's hosted workspace (as a download), by ?path=",
    query=WorkspaceFileQuery,
    binary=True,
)
def download_workspace_file(session_id: str) -> Response:
    from skyloop import workspace as paths
    from skyloop.environments import service

    store = deps.store()
    session = sessions.get_session(store, session_id)  # another principal's is 404, whatever it asked
    q = query(current_event(router), WorkspaceFileQuery)
    try:
        relative = paths.relative(q.path)
        data = service.engine().read(session.id, relative)
    except paths.PathOutsideWorkspace as exc:
        raise InvalidInputError(str(exc), param="path") from None
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise NotFoundError(f"no file {paths.absolute(q.path)} in this session's workspace") from None
    name = relative.rsplit("/", 1)[-1]
    headers = {
        "Content-Disposition": session_files.attachment_disposition(name),
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
    }
    return Response(
        status_code=200, content_type=session_files.content_type_for(None, name), body=data, headers=headers
    )
