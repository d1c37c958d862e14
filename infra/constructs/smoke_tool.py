"""SmokeTool: the echo function ``skyloop smoke`` declares as its server tool with an approval.

The code is ``skyloop/tools/smoke_echo.py`` inlined (standard library only, no
layer, no asset), the same file ``skyloop dev`` serves as the local tool
``smoke_echo``. It may write its own log group and nothing else; the turn
machine may invoke it (``TurnMachine``'s ``tool_functions``), and its ARN is
the stack output ``SmokeToolArn`` that ``skyloop smoke --tool-function`` takes.
Idle, it costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.constructs._common import new_log_group
from infra.constructs.functions import ARCHITECTURE, RUNTIME
from skyloop.manifest import PROJECT_ROOT

if TYPE_CHECKING:
    from pathlib import Path

    from infra.config import StackConfig

SOURCE = PROJECT_ROOT / "shared" / "skyloop" / "tools" / "smoke_echo.py"
HANDLER = "index.smoke_echo"  # inline code is written to index.py
MEMORY_MB = 128
TIMEOUT_S = 10
INLINE_MAX_BYTES = 4096  # Lambda's limit for ZipFile code in a template


def inline_source(path: Path = SOURCE) -> str:
    text = path.read_text()
    if len(text.encode()) > INLINE_MAX_BYTES:
        raise ValueError(f"{path.name} is over the {INLINE_MAX_BYTES}-byte limit of inline Lambda code")
    return text


class SmokeTool(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig) -> None:
        super().__init__(scope, construct_id)
        log_group = new_log_group(self, "Logs", config)
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="skyloop smoke_echo tool: its own logs only",
        )
        log_group.grant_write(role)
        self.function = lambda_.Function(
            self,
            "Echo",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=HANDLER,
            code=lambda_.Code.from_inline(inline_source()),
            memory_size=MEMORY_MB,
            timeout=cdk.Duration.seconds(TIMEOUT_S),
            description="skyloop smoke: echoes its text argument (the server tool `skyloop smoke` approves)",
            role=role,
            log_group=log_group,
        )
