"""The ``live`` function: API Gateway WebSocket routes to connections, subscriptions and replays.

``$connect`` records the connection, ``$disconnect`` removes it with its
subscriptions, ``$default`` answers the client's frames (see
:mod:`skyloop.live.protocol`); every answer goes back with
``PostToConnection``. A subscribe writes its subscription row *first* and
only then replays the log after the cursor: an event that commits after the
write is posted by the fan-out (whose Query sees the row), one that
committed before it is in the log the replay reads, so nothing falls
between the two (one may arrive twice; the client dedupes by id).

The replay stops before the invocation runs out of time; ``subscribed``
then says ``complete: false`` and the client asks for the rest.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from skyloop import principals
from skyloop.live import access, protocol
from skyloop.live.poster import ConnectionGone
from skyloop.live.protocol import ERROR_QUOTA, ERROR_UNAUTHORIZED, ProtocolError

if TYPE_CHECKING:
    from collections.abc import Callable

    from skyloop.live.poster import Poster
    from skyloop.settings import Settings
    from skyloop.store import DynamoStore
    from skyloop.store.dynamodb.live import LiveConnection, LiveRecords

log = logging.getLogger("skyloop.live")
REPLAY_PAGE = 500
REPLAY_RESERVE_S = 3.0  # stop replaying this long before the invocation's deadline
CONNECTION_SLACK_S = 300  # rows outlive API Gateway's two-hour limit by this much (then TTL)


class LiveService:
    """One connection's frames against the table and the management API."""

    def __init__(
        self,
        store: DynamoStore,
        records: LiveRecords,
        poster: Poster,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.records = records
        self.poster = poster
        self.settings = settings
        self.clock = clock

    # ------------------------------------------------------------------ routes
    def connect(self, connection_id: str) -> None:
        now = int(self.clock())
        expires = now + protocol.MAX_CONNECTION_S + CONNECTION_SLACK_S
        self.records.open_connection(connection_id, connected_at=now, expires_at=expires)

    def disconnect(self, connection_id: str) -> None:
        self.records.close_connection(connection_id)

    def receive(
        self, connection_id: str, body: str | bytes | None, *, remaining_s: Callable[[], float]
    ) -> None:
        """Answer one frame; a refused frame gets an ``error`` frame and changes nothing."""
        frame: object = None
        try:
            try:
                frame = protocol.parse(body)
                if isinstance(frame, protocol.Auth):
                    self._auth(connection_id, frame)
                elif isinstance(frame, protocol.Subscribe):
                    self._subscribe(connection_id, frame, remaining_s)
                elif isinstance(frame, protocol.Unsubscribe):
                    self._unsubscribe(connection_id, frame)
                else:
                    self._send(connection_id, protocol.pong())
            except ProtocolError as refused:
                self._send(connection_id, refused.frame(frame))
            except ConnectionGone:
                raise
            except Exception:
                log.exception("live frame failed")
                self._send(
                    connection_id, protocol.error(protocol.ERROR_INTERNAL, "An internal error occurred.")
                )
                raise
        except ConnectionGone:
            self.records.close_connection(connection_id)  # the client left meanwhile

    # ------------------------------------------------------------------ frames
    def _auth(self, connection_id: str, frame: protocol.Auth) -> None:
        grant = access.authenticate(self.store, frame.token, self.settings)
        if self.records.authorize_connection(connection_id, grant):
            self._send(connection_id, protocol.authenticated(grant.principal.name))

    def _connection(self, connection_id: str) -> LiveConnection:
        """The connection with the principal it acts as; ``unauthorized`` unless it may act."""
        connection = self.records.get_connection(connection_id)
        if connection is None:
            raise ProtocolError(ERROR_UNAUTHORIZED, "unknown connection: connect again")
        if not self.settings.require_token:
            return dataclasses.replace(connection, principal=principals.OPEN)
        if connection.principal is None:
            raise ProtocolError(ERROR_UNAUTHORIZED, 'authenticate first: {"action": "auth", "token": "..."}')
        grant = access.Grant(connection.principal, connection.token_hash, connection.auth_expires_at)
        if not access.still_valid(self.store, grant, self.clock()):
            raise ProtocolError(
                ERROR_UNAUTHORIZED, "the token was revoked or has expired: authenticate again"
            )
        return connection

    def _subscribe(
        self, connection_id: str, frame: protocol.Subscribe, remaining_s: Callable[[], float]
    ) -> None:
        connection = self._connection(connection_id)
        assert connection.principal is not None
        session = access.watchable_session(self.store, connection.principal, frame.session_id)
        if (
            frame.session_id not in connection.sessions
            and len(connection.sessions) >= protocol.MAX_SUBSCRIPTIONS
        ):
            raise ProtocolError(
                ERROR_QUOTA,
                f"a connection may watch at most {protocol.MAX_SUBSCRIPTIONS} sessions",
                session_id=frame.session_id,
            )
        cursor = frame.after if frame.after is not None else session.last_seq
        if not self.records.subscribe(frame.session_id, connection):  # first: see the module docstring
            return  # the connection closed meanwhile
        last, complete = self._replay(connection_id, frame.session_id, cursor, remaining_s)
        self._send(connection_id, protocol.subscribed(frame.session_id, cursor, last, complete=complete))

    def _replay(
        self, connection_id: str, session_id: str, cursor: int, remaining_s: Callable[[], float]
    ) -> tuple[int, bool]:
        """Post every retained event after ``cursor``; the last seq covered and whether all were."""
        while True:
            page, covered, full = self.store.read_event_page(session_id, cursor, limit=REPLAY_PAGE)
            for event in page:
                if remaining_s() < REPLAY_RESERVE_S:
                    return cursor, False
                self.poster.post(connection_id, protocol.event_message(session_id, event))
                cursor = event.seq
            cursor = covered
            if not full:
                return cursor, True

    def _unsubscribe(self, connection_id: str, frame: protocol.Unsubscribe) -> None:
        self.records.unsubscribe(frame.session_id, connection_id)
        self._send(connection_id, protocol.unsubscribed(frame.session_id))

    def _send(self, connection_id: str, frame: dict[str, Any]) -> None:
        self.poster.post(connection_id, protocol.encode(frame))


def management_endpoint(settings: Settings, request_context: dict[str, Any]) -> str:
    """Where to post: the configured endpoint, else the stage the request came through."""
    if settings.live_endpoint:
        return settings.live_endpoint
    return f"https://{request_context['domainName']}/{request_context['stage']}"


def handle(event: dict[str, Any], remaining_s: Callable[[], float]) -> dict[str, Any]:
    """An API Gateway WebSocket event (``$connect``, ``$disconnect``, ``$default``) -> the service."""
    from skyloop import deps
    from skyloop.live import poster

    context = event["requestContext"]
    route = context.get("routeKey")
    connection_id = context["connectionId"]
    settings = deps.get_settings()
    service = LiveService(
        deps.store(),
        deps.live_records(),
        poster.for_endpoint(management_endpoint(settings, context)),
        settings,
    )
    if route == "$connect":
        service.connect(connection_id)
    elif route == "$disconnect":
        service.disconnect(connection_id)
    else:
        body = event.get("body")
        if body is not None and event.get("isBase64Encoded"):
            body = base64.b64decode(body)
        service.receive(connection_id, body, remaining_s=remaining_s)
    return {"statusCode": 200}
