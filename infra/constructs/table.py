"""Data: the single table, from the same key schema the local stack creates on moto."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.constructs._common import removal_policy
from skyloop.store import schema

if TYPE_CHECKING:
    from infra.config import StackConfig


def _string(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


class SessionTable(Construct):
    """On-demand, TTL on the event retention attribute, point-in-time recovery, a stream of new images.

    ``prod`` keeps the table (and its data) when the stack is deleted; dev
    stacks delete it so a teardown leaves nothing behind.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig) -> None:
        super().__init__(scope, construct_id)
        spec = schema.create_table_kwargs("unused")
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_string(schema.PK),
            sort_key=_string(schema.SK),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=schema.TTL_ATTRIBUTE,
            # new images of every write: the live channel's fan-out (and later lifecycle publishing)
            # each consume it through an event source mapping of their own
            stream=dynamodb.StreamViewType.NEW_IMAGE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=config.prod,
            removal_policy=removal_policy(config),
        )
        for gsi in spec["GlobalSecondaryIndexes"]:
            hash_key, range_key = (k["AttributeName"] for k in gsi["KeySchema"])
            self.table.add_global_secondary_index(
                index_name=gsi["IndexName"],
                partition_key=_string(hash_key),
                sort_key=_string(range_key),
                projection_type=dynamodb.ProjectionType[gsi["Projection"]["ProjectionType"]],
            )
