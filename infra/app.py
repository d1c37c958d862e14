"""CDK entry point: ``python infra/app.py`` (or ``cdk synth``) writes the cloud assembly to ``cdk.out/``.

Offline and without Docker. Context switches (``cdk.json`` or ``-c``): ``prod``,
``lwaLayerVersion``, ``alarmTopicArn``, ``powertoolsTracer``, ``corsOrigins``, ``reconcileMinutes``,
``bedrockModelArns``, ``lambdaToolArns``, ``cognito`` or ``jwtIssuer``/``jwtAudience``/``jwtJwksUrl``,
``jwtAuthorizerOnApi``, ``quotaRunningTurns``/``quotaTurnsPerMinute``/``quotaSessions``,
``outboundAllow`` (see ``docs/deploy.md``).

Right after synth, ``infra.checks`` runs over the cloud assembly: anything AWS
would refuse at deploy or call time (state machine rules, Lambda and CloudFront
limits, name lengths, policy sizes) is listed and the app exits 1, so ``make
synth``, ``cdk synth`` and ``cdk deploy`` stop before AWS sees it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, Python puts infra/ first on sys.path, where infra/constructs/ would
# shadow the `constructs` library: import from the repository root instead.
if sys.path and Path(sys.path[0]).resolve() == ROOT / "infra":
    sys.path[0] = str(ROOT)
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_DISABLE_STACK_TRACE", "1")  # as the CDK CLI does without --debug; faster synth
# CDK's built-in "CloudFormation Validate" plugin only ever warns and multiplies synth time
# (about 1.5 s -> 35 s here); tests/infra runs cfn-lint instead. CDK_VALIDATION=true turns it on.
os.environ.setdefault("CDK_VALIDATION", "false")

import aws_cdk as cdk  # noqa: E402

from infra import constants as C  # noqa: E402
from infra.checks import check_assembly, format_findings  # noqa: E402
from infra.stack import SkyloopStack, attach_nag  # noqa: E402


def default_context() -> dict[str, object]:
    """``cdk.json``'s context when run without the CDK CLI (the CLI passes it in itself)."""
    if "CDK_CONTEXT_JSON" in os.environ:
        return {}
    return dict(json.loads((ROOT / "cdk.json").read_text()).get("context", {}))


def build_app(outdir: str | None = None, context: dict[str, object] | None = None) -> cdk.App:
    """The app with the stack and cdk-nag attached; ``context`` overrides ``cdk.json``."""
    app = cdk.App(
        outdir=outdir or os.environ.get("CDK_OUTDIR") or str(ROOT / "cdk.out"),
        context={**default_context(), **(context or {})},
    )
    SkyloopStack(
        app,
        C.STACK_NAME,
        description="skyloop: serverless agent sessions (Lambda, DynamoDB, Step Functions, CloudFront)",
        env=cdk.Environment(
            account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
        ),
    )
    attach_nag(app)
    return app


def check(outdir: Path) -> int:
    """The exit status after ``infra.checks`` over a synthesized assembly; the findings go to stderr."""
    findings = check_assembly(outdir)
    if not findings:
        return 0
    print(format_findings(findings), file=sys.stderr)
    print(
        f"synth stops here: AWS would refuse {outdir} (docs/deploy.md, 'What synth checks before AWS sees it')",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(check(Path(build_app().synth().directory)))
