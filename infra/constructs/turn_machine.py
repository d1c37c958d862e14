"""Turn engine: the Standard state machine from the same ASL file the local stack runs."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra import constants as C
from infra import permissions
from infra.constructs._common import grant_arns, new_log_group, pascal, removal_policy, stack_instance_suffix
from skyloop.manifest import ASL_PATH, FUNCTIONS, asl_substitutions

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

    from infra.config import StackConfig
    from infra.constructs.functions import Functions

PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")


def _comments(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["Comment"]] if isinstance(node.get("Comment"), str) else []
        return own + [c for v in node.values() for c in _comments(v)]
    if isinstance(node, list):
        return [c for v in node for c in _comments(v)]
    return []


def cloudformation_definition(text: str, keys: set[str]) -> str:
    """The ASL text for ``DefinitionString``: every ``${...}`` must be a substitution key.

    CloudFormation substitutes ``${name}`` in the definition; a placeholder with
    no key (say, prose in a ``Comment``) is an unresolved substitution (cfn-lint
    E1029). In comments such text is defused to ``$(name)``; anywhere else it is
    a broken definition and synth stops.
    """
    unknown = [m.group(0) for m in PLACEHOLDER.finditer(text) if m.group(1) not in keys]
    if not unknown:
        return text
    in_comments = sum(c.count(u) for c in _comments(json.loads(text)) for u in set(unknown))
    if in_comments != len(unknown):
        raise ValueError(f"{ASL_PATH.name}: placeholders without a substitution: {sorted(set(unknown))}")
    return PLACEHOLDER.sub(lambda m: m.group(0) if m.group(1) in keys else f"$({m.group(1)})", text)


class TurnMachine(Construct):
    """``DefinitionBody.from_string`` inlines the ASL (assertable, no S3 asset); task retries are in the file.

    The machine may invoke exactly the step functions the ASL names. Callers get
    the actions declared in ``infra.permissions.TURN_ACCESS``. SendTaskSuccess
    for ``await_client`` goes into a separate policy: the machine's definition
    refers to that function, so a grant in the function's own default policy
    would make the function depend on the machine and close a cycle.

    No execution timeout on purpose: an execution that times out skips the
    ASL's Catch -> FailTurn and would leave its session "running". Every task
    has its own bound instead (Lambda timeouts; the client-tool wait's
    ``TimeoutSecondsPath``, up to the agent's limit of days).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Functions,
        config: StackConfig,
        tool_functions: tuple[lambda_.IFunction, ...] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        steps = [functions[f.name] for f in FUNCTIONS if f.asl_key]
        substitutions = asl_substitutions(
            {f.name: functions[f.name].function_arn for f in FUNCTIONS if f.asl_key},
            partition=cdk.Aws.PARTITION,
        )
        stack = cdk.Stack.of(self)
        self.log_group = new_log_group(
            self,
            "Logs",
            config,
            name=(
                f"{C.TURNS_LOG_GROUP_PREFIX}{stack.stack_name}-{C.TURNS_LOG_GROUP_PURPOSE}-"
                f"{stack.region}-{stack_instance_suffix()}"
            ),
        )
        self.machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(
                cloudformation_definition(ASL_PATH.read_text(), set(substitutions))
            ),
            definition_substitutions=substitutions,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                # State carries user content and model errors: keep payloads out of the logs.
                include_execution_data=False,
            ),
            removal_policy=removal_policy(config),
        )
        # Executions of this machine. Built from pseudo parameters rather than the stack's
        # env, so the ARN (and the cdk-nag finding that names it) is the same in every account.
        self.executions_arn = cdk.Fn.join(
            "",
            [
                f"arn:{cdk.Aws.PARTITION}:states:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:execution:",
                cdk.Fn.select(6, cdk.Fn.split(":", self.machine.state_machine_arn)),
                ":*",
            ],
        )
        # Exactly the unqualified ARNs the ASL invokes (grant_invoke would add "<arn>:*" too).
        self.machine.add_to_role_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[f.function_arn for f in steps])
        )
        # The Act state's InvokeTool tasks call the function an agent's Lambda tool names
        # (FunctionName.$ from run_tool's prepare): only the ARNs the operator listed, none by default.
        # The stack's own tools (``tool_functions``: the smoke echo) come on top of them.
        tool_arns = [f.function_arn for f in tool_functions] + list(config.lambda_tool_arns)
        if tool_arns:
            grant_arns(self, "LambdaTools", self.machine.role, ["lambda:InvokeFunction"], tool_arns)

        step_names = {f.name for f in FUNCTIONS if f.asl_key}
        for name, actions in permissions.TURN_ACCESS.items():
            fn = functions[name]
            if name in step_names:
                self._grant_to_step(name, fn, actions)
                continue
            if "start" in actions:
                self.machine.grant_start_execution(fn)
            if "stop" in actions:
                fn.add_to_role_policy(
                    iam.PolicyStatement(actions=["states:StopExecution"], resources=[self.executions_arn])
                )
            if "resume" in actions:
                self.machine.grant(fn, "states:SendTaskSuccess")
            if "heartbeat" in actions:
                self.machine.grant(fn, "states:SendTaskHeartbeat")
            if "describe" in actions:
                fn.add_to_role_policy(
                    iam.PolicyStatement(actions=["states:DescribeExecution"], resources=[self.executions_arn])
                )
            fn.add_environment("SKYLOOP_STATE_MACHINE_ARN", self.machine.state_machine_arn)

    def _grant_to_step(self, name: str, fn: lambda_.Function, actions: tuple[str, ...]) -> None:
        if set(actions) - {"resume"}:
            raise ValueError(f"step function {name} may only resume its own turn, not {actions}")
        assert fn.role is not None
        iam.Policy(
            self,
            f"{pascal(name)}Resume",
            roles=[fn.role],
            statements=[
                iam.PolicyStatement(
                    actions=["states:SendTaskSuccess"], resources=[self.machine.state_machine_arn]
                )
            ],
        )
