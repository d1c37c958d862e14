"""Sending to a WebSocket connection held by API Gateway (``PostToConnection``)."""

from __future__ import annotations

from functools import cache
from typing import Any, Protocol

from botocore.exceptions import ClientError


class ConnectionGone(Exception):
    """API Gateway no longer holds the connection (410 ``GoneException``): forget it."""


class Poster(Protocol):
    def post(self, connection_id: str, data: bytes) -> None:
        """Send one message; raises :class:`ConnectionGone` when the client has left."""
        ...


class ApiGatewayPoster:
    """``PostToConnection`` through the stage's management endpoint."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def post(self, connection_id: str, data: bytes) -> None:
        try:
            self.client.post_to_connection(ConnectionId=connection_id, Data=data)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "GoneException":
                raise ConnectionGone(connection_id) from None
            raise


@cache
def for_endpoint(endpoint_url: str) -> ApiGatewayPoster:
    """One client per management endpoint (``https://<api>.execute-api.<region>.amazonaws.com/<stage>``),
    with short timeouts: a slow post must not hold a fan-out batch for a minute."""
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=3, read_timeout=5, retries={"mode": "standard", "max_attempts": 3})
    return ApiGatewayPoster(
        boto3.session.Session().client("apigatewaymanagementapi", endpoint_url=endpoint_url, config=config)
    )
