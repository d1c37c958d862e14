"""The store on DynamoDB: one class per record kind, composed (see ``skyloop.store.keys`` for keys)."""

from skyloop.store.dynamodb.agents import AgentRecords
from skyloop.store.dynamodb.events import EventLog
from skyloop.store.dynamodb.files import FileRecords
from skyloop.store.dynamodb.maintenance import Maintenance
from skyloop.store.dynamodb.quotas import QuotaRecords
from skyloop.store.dynamodb.schedules import ScheduleRecords
from skyloop.store.dynamodb.sessions import SessionRecords
from skyloop.store.dynamodb.tokens import TokenRecords
from skyloop.store.dynamodb.turns import TurnRecords


class DynamoStore(
    AgentRecords,
    SessionRecords,
    EventLog,
    TurnRecords,
    FileRecords,
    TokenRecords,
    QuotaRecords,
    ScheduleRecords,
    Maintenance,
):
    """The single table behind :class:`skyloop.store.Store`.

    Args:
        table_name: the table.
        client: a ready ``boto3`` DynamoDB client (tests pass a moto-backed one).
        event_ttl_s: how long stream events and dedupe markers stay replayable.

    Examples:
        >>> import boto3
        >>> store = DynamoStore("skyloop", boto3.client("dynamodb"))
        >>> store.get_session(session_id).status
        'idle'
    """


__all__ = ["DynamoStore"]
