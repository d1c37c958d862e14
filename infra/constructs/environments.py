"""Hosted environments in the cloud: two AgentCore custom code interpreters and who may use them.

``network: none`` sessions run in the ``SANDBOX`` interpreter (no network at all),
``network: public`` ones in the ``PUBLIC`` interpreter. Their execution role may
be assumed by AgentCore for this account only and is granted nothing: the code a
session runs can read neither the table, nor the secrets, nor the blob bucket.
The functions that use them (``infra.permissions.HOSTED_ACCESS``) get exactly the
data-plane actions they call, on these two interpreters only, and find them
through ``SKYLOOP_CODE_INTERPRETER_ID`` / ``SKYLOOP_CODE_INTERPRETER_PUBLIC_ID``
(``skyloop.environments.agentcore``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra import constants as C
from infra import permissions

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

NAME_MAX = 48  # CreateCodeInterpreter: [a-zA-Z][a-zA-Z0-9_]{0,47}


def interpreter_name(stack_name: str, purpose: str) -> str:
    """``<stack>_<purpose>`` in the characters AgentCore takes (unique per account and region with the stack)."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", stack_name)
    if not base or not base[0].isalpha():
        base = "s" + base
    suffix = f"_{purpose}"
    return base[: NAME_MAX - len(suffix)] + suffix


class HostedEnvironments(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, functions: dict[str, lambda_.Function]
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.role = iam.Role(
            self,
            "InterpreterRole",
            assumed_by=iam.ServicePrincipal(
                "bedrock-agentcore.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
            description="Hosted environments' code interpreters: may read nothing of the stack",
        )
        self.sandbox = agentcore.CfnCodeInterpreterCustom(
            self,
            "Sandbox",
            name=interpreter_name(stack.stack_name, C.INTERPRETER_SANDBOX_PURPOSE),
            description="skyloop hosted environments with network: none",
            network_configuration=agentcore.CfnCodeInterpreterCustom.CodeInterpreterNetworkConfigurationProperty(
                network_mode="SANDBOX"
            ),
            execution_role_arn=self.role.role_arn,
        )
        self.public = agentcore.CfnCodeInterpreterCustom(
            self,
            "Public",
            name=interpreter_name(stack.stack_name, C.INTERPRETER_PUBLIC_PURPOSE),
            description="skyloop hosted environments with network: public",
            network_configuration=agentcore.CfnCodeInterpreterCustom.CodeInterpreterNetworkConfigurationProperty(
                network_mode="PUBLIC"
            ),
            execution_role_arn=self.role.role_arn,
        )
        interpreters = [self.sandbox.attr_code_interpreter_arn, self.public.attr_code_interpreter_arn]
        for name, actions in permissions.HOSTED_ACCESS.items():
            function = functions[name]
            function.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=interpreters))
            function.add_environment("SKYLOOP_HOSTED_ENGINE", "agentcore")
            function.add_environment("SKYLOOP_CODE_INTERPRETER_ID", self.sandbox.attr_code_interpreter_id)
            function.add_environment(
                "SKYLOOP_CODE_INTERPRETER_PUBLIC_ID", self.public.attr_code_interpreter_id
            )
