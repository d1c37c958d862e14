"""A synthesized template and its cloud assembly, against the limits AWS enforces at deploy time.

CloudFormation accepts a template that a service then refuses mid-deploy (and
rolls back): these checks find that at synth. Values only known at deploy time are
measured at their worst case (``infra.checks.intrinsics``). The limits and where
AWS documents them:

* Lambda (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html):
  code and layers unzipped at most 262,144,000 bytes ("250 MB"; GetAccountSettings'
  ``CodeSizeUnzipped``, and the deploy error "Function code combined with layers exceeds the
  maximum allowed size of 262144000 bytes"); 5 layers; environment variables at most 4 KB,
  measured as the compact JSON of the map (the error reads "... exceeded the 4KB limit.
  String measured: {"KEY":"value",...}"); memory 128-10,240 MB; timeout at most 900 s;
  description 256 characters; /tmp 512-10,240 MB; reserved concurrency that leaves the
  account's 100 unreserved (of the default 1,000).
* CloudFront Functions (https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/cloudfront-limits.html#limits-functions):
  code at most 10 KB; runtime ``cloudfront-js-2.0`` (the only runtime whose JavaScript
  ``node`` can vouch for: 1.0 is ES 5.1); the code must parse and define ``handler``.
* IAM (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html), in
  characters without white space: a role's inline policies together 10,240, a user's 2,048, a
  group's 5,120; a managed policy 6,144; a role trust policy 2,048; 10 managed policies a role.
* S3 bucket policy at most 20 KB (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-policies.html).
* Step Functions: the definition after ``DefinitionSubstitutions`` (``infra.checks.asl``).
* Physical names: ``infra.checks.names``.
* CloudFormation (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html):
  a template of at most 1 MB from S3 (the service answers "Template may not exceed 1000000 bytes
  in size", so 1,000,000), 500 resources, 200 outputs, 200 parameters, a 1,024-byte description.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.checks.asl import check_definition_text
from infra.checks.findings import Finding
from infra.checks.intrinsics import Unestimable, WorstCase
from infra.checks.names import check_names
from infra.checks.routing import check_routing

LAMBDA_UNZIPPED_MAX = 262_144_000
LAMBDA_ENV_MAX = 4_096
LAMBDA_LAYERS_MAX = 5
LAMBDA_MEMORY = (128, 10_240)
LAMBDA_TIMEOUT_MAX = 900
LAMBDA_DESCRIPTION_MAX = 256
LAMBDA_EPHEMERAL = (512, 10_240)
ACCOUNT_CONCURRENCY = 1_000  # the default quota; Lambda keeps 100 of it unreserved
UNRESERVED_CONCURRENCY_MIN = 100
CF_FUNCTION_MAX = 10_240
CF_RUNTIME = "cloudfront-js-2.0"
IAM_INLINE_MAX = {"Roles": 10_240, "Users": 2_048, "Groups": 5_120}
IAM_MANAGED_MAX = 6_144
IAM_TRUST_MAX = 2_048
IAM_MANAGED_PER_ROLE = 10
S3_BUCKET_POLICY_MAX = 20_480
CFN_TEMPLATE_MAX = 1_000_000
CFN_COUNTS = {"Resources": 500, "Outputs": 200, "Parameters": 200}
CFN_DESCRIPTION_MAX = 1_024
MIB = 1 << 20


@dataclass(frozen=True)
class LayerAllowance:
    """A layer published outside this stack, matched by ARN, and the unzipped size it is granted."""

    arn: re.Pattern[str]
    size: int
    why: str


# External layers have no asset here to measure: each gets a documented allowance.
EXTERNAL_LAYERS = (
    LayerAllowance(
        re.compile(r"arn:[a-z-]+:lambda:[a-z0-9-]+:753240598075:layer:LambdaAdapterLayer(X86|Arm64):\d+"),
        16 * MIB,
        "the Lambda Web Adapter layer is one extension binary of about 5 MB (4.7 MB measured in "
        "aws/aws-lambda-web-adapter#114) and its bootstrap script; 16 MiB leaves three times that",
    ),
)


# ---------------------------------------------------------------- the cloud assembly
def asset_paths(outdir: Path) -> dict[str, Path]:
    """S3 object key -> the staged asset (folder or file) in a cloud assembly, from its asset manifests."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    out: dict[str, Path] = {}
    for artifact in manifest.get("artifacts", {}).values():
        if artifact.get("type") != "cdk:asset-manifest":
            continue
        assets = json.loads((outdir / artifact["properties"]["file"]).read_text())
        for entry in assets.get("files", {}).values():
            for destination in entry.get("destinations", {}).values():
                out[destination["objectKey"]] = outdir / entry["source"]["path"]
    return out


def stack_templates(outdir: Path) -> dict[str, dict[str, Any]]:
    manifest = json.loads((outdir / "manifest.json").read_text())
    return {
        name: json.loads((outdir / artifact["properties"]["templateFile"]).read_text())
        for name, artifact in manifest.get("artifacts", {}).items()
        if artifact.get("type") == "aws:cloudformation:stack"
    }


def check_assembly(outdir: Path) -> list[Finding]:
    """Every check over every stack of a synthesized cloud assembly (``cdk.out``)."""
    assets = asset_paths(outdir)
    manifest = json.loads((outdir / "manifest.json").read_text())
    out = []
    for name, template in stack_templates(outdir).items():
        size = (outdir / manifest["artifacts"][name]["properties"]["templateFile"]).stat().st_size
        out += [f.within(name) for f in check_template(template, assets, template_bytes=size)]
    return out


def check_template(
    template: dict[str, Any], assets: dict[str, Path], *, template_bytes: int | None = None
) -> list[Finding]:
    """Every check over one template; ``template_bytes`` is the file's size (else estimated as CDK writes it)."""
    wc = WorstCase(template)
    if template_bytes is None:
        template_bytes = len(json.dumps(template, indent=1).encode())
    return [
        *cloudformation_limits(template, template_bytes),
        *lambda_code_size(template, assets, wc),
        *lambda_environment(template, wc),
        *lambda_settings(template),
        *cloudfront_functions(template, wc),
        *check_names(template, wc),
        *iam_policies(template, wc),
        *s3_bucket_policies(template, wc),
        *state_machines(template, wc),
        *check_routing(template),
    ]


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {
        lid: r.get("Properties", {})
        for lid, r in template.get("Resources", {}).items()
        if r.get("Type") == kind
    }


def _unknown(logical_id: str, exc: Unestimable) -> Finding:
    return Finding(rule="estimate/unknown", resource=logical_id, message=str(exc))


# ---------------------------------------------------------------- CloudFormation
def cloudformation_limits(template: dict[str, Any], template_bytes: int) -> list[Finding]:
    out = []
    if template_bytes > CFN_TEMPLATE_MAX:
        out.append(
            Finding(
                rule="cfn/template-size",
                resource="template",
                message=f"{template_bytes:,} bytes; CloudFormation takes at most {CFN_TEMPLATE_MAX:,}",
            )
        )
    for section, limit in CFN_COUNTS.items():
        count = len(template.get(section, {}))
        if count > limit:
            out.append(
                Finding(
                    rule="cfn/count", resource=section, message=f"{count} {section.lower()}; at most {limit}"
                )
            )
    description = template.get("Description", "")
    if len(description.encode()) > CFN_DESCRIPTION_MAX:
        out.append(
            Finding(
                rule="cfn/description",
                resource="template",
                message=f"Description of {len(description.encode()):,} bytes; at most {CFN_DESCRIPTION_MAX:,}",
            )
        )
    return out


# ---------------------------------------------------------------- Lambda
def unzipped_size(path: Path) -> int:
    """What Lambda unpacks: the files of a staged folder (symlinks followed), or a zip's members."""
    if path.is_file():
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return sum(info.file_size for info in archive.infolist())
        return path.stat().st_size
    total, seen = 0, set()
    for folder, _dirs, files in os.walk(path, followlinks=True):
        stat = os.stat(folder)
        if (stat.st_dev, stat.st_ino) in seen:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        total += sum(os.stat(Path(folder) / f).st_size for f in files)
    return total


def lambda_code_size(template: dict[str, Any], assets: dict[str, Path], wc: WorstCase) -> list[Finding]:
    """Each function's code and its layers, unzipped, within 262,144,000 bytes."""
    layers = resources(template, "AWS::Lambda::LayerVersion")
    measure = _Measure(assets)
    out = []
    for lid, props in resources(template, "AWS::Lambda::Function").items():
        if "ImageUri" in props.get("Code", {}):
            continue  # container images have their own 10 GB limit and no layers
        parts: list[tuple[str, int]] = []
        problems: list[Finding] = []
        for what, measured in [("code", measure.code(props.get("Code", {})))] + [
            (f"layer {i}", measure.layer(layer, layers, wc))
            for i, layer in enumerate(props.get("Layers", []))
        ]:
            if isinstance(measured, int):
                parts.append((what, measured))
            else:
                problems.append(
                    Finding(rule="lambda/code-unmeasured", resource=lid, message=f"{what}: {measured}")
                )
        out += problems
        total = sum(size for _, size in parts)
        if total > LAMBDA_UNZIPPED_MAX:
            detail = ", ".join(f"{what} {size:,}" for what, size in parts)
            out.append(
                Finding(
                    rule="lambda/code-size",
                    resource=lid,
                    message=f"code and layers unzip to {total:,} bytes ({detail}); Lambda takes at most "
                    f"{LAMBDA_UNZIPPED_MAX:,}",
                )
            )
    return out


class _Measure:
    """Unzipped sizes of staged assets, each measured once per check (a layer is shared by every function)."""

    def __init__(self, assets: dict[str, Path]) -> None:
        self.assets = assets
        self.sizes: dict[Path, int] = {}

    def code(self, code: dict[str, Any]) -> int | str:
        if isinstance(code.get("ZipFile"), str):
            return len(code["ZipFile"].encode())
        key = code.get("S3Key")
        if not (isinstance(key, str) and key in self.assets):
            return f"no staged asset for {json.dumps(code)[:200]} in the cloud assembly"
        path = self.assets[key]
        if path not in self.sizes:
            self.sizes[path] = unzipped_size(path)
        return self.sizes[path]

    def layer(self, layer: Any, layers: dict[str, dict[str, Any]], wc: WorstCase) -> int | str:
        if isinstance(layer, dict) and layer.get("Ref") in layers:
            return self.code(layers[layer["Ref"]].get("Content", {}))
        try:
            arn = wc.string(layer)
        except Unestimable as exc:
            return str(exc)
        for allowance in EXTERNAL_LAYERS:
            if allowance.arn.fullmatch(arn):
                return allowance.size
        return f"{arn}: an external layer without a size allowance (add it to EXTERNAL_LAYERS with its size)"


def environment_size(variables: dict[str, str]) -> int:
    """The 4 KB Lambda measures: the compact JSON of the variables, in UTF-8 bytes."""
    return len(json.dumps(variables, separators=(",", ":"), ensure_ascii=False).encode())


def lambda_environment(template: dict[str, Any], wc: WorstCase) -> list[Finding]:
    out = []
    for lid, props in resources(template, "AWS::Lambda::Function").items():
        raw = props.get("Environment", {}).get("Variables", {})
        try:
            variables = {k: wc.string(v) for k, v in raw.items()}
        except Unestimable as exc:
            out.append(_unknown(lid, exc))
            continue
        size = environment_size(variables)
        if size > LAMBDA_ENV_MAX:
            largest = sorted(variables, key=lambda k: -len(k) - len(variables[k]))[:3]
            out.append(
                Finding(
                    rule="lambda/env-size",
                    resource=lid,
                    message=f"environment variables take {size:,} bytes at worst (largest: "
                    f"{', '.join(largest)}); Lambda takes at most {LAMBDA_ENV_MAX:,}",
                )
            )
    return out


def lambda_settings(template: dict[str, Any]) -> list[Finding]:
    functions = resources(template, "AWS::Lambda::Function")
    out = []
    for lid, props in functions.items():
        out += [Finding(rule=rule, resource=lid, message=why) for rule, why in _settings(props)]
    reserved = {
        lid: p["ReservedConcurrentExecutions"]
        for lid, p in functions.items()
        if isinstance(p.get("ReservedConcurrentExecutions"), int)
    }
    budget = ACCOUNT_CONCURRENCY - UNRESERVED_CONCURRENCY_MIN
    if sum(reserved.values()) > budget or any(r < 0 for r in reserved.values()):
        out.append(
            Finding(
                rule="lambda/concurrency",
                resource=", ".join(sorted(reserved)),
                message=f"reserved concurrency {sum(reserved.values())} (each at least 0) must leave "
                f"{UNRESERVED_CONCURRENCY_MIN} of the default {ACCOUNT_CONCURRENCY} unreserved: at most {budget}",
            )
        )
    return out


def _settings(props: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    memory, timeout = props.get("MemorySize", 128), props.get("Timeout", 3)
    if not (isinstance(memory, int) and LAMBDA_MEMORY[0] <= memory <= LAMBDA_MEMORY[1]):
        out.append(("lambda/memory", f"MemorySize {memory!r}: {LAMBDA_MEMORY[0]}-{LAMBDA_MEMORY[1]} MB"))
    if not (isinstance(timeout, int) and 1 <= timeout <= LAMBDA_TIMEOUT_MAX):
        out.append(("lambda/timeout", f"Timeout {timeout!r}: 1-{LAMBDA_TIMEOUT_MAX} seconds"))
    layers = props.get("Layers", [])
    if len(layers) > LAMBDA_LAYERS_MAX:
        out.append(("lambda/layers", f"{len(layers)} layers; at most {LAMBDA_LAYERS_MAX}"))
    description = props.get("Description")
    if isinstance(description, str) and len(description) > LAMBDA_DESCRIPTION_MAX:
        out.append(("lambda/description", f"Description of {len(description)} characters; at most 256"))
    storage = props.get("EphemeralStorage", {}).get("Size", LAMBDA_EPHEMERAL[0])
    if not (isinstance(storage, int) and LAMBDA_EPHEMERAL[0] <= storage <= LAMBDA_EPHEMERAL[1]):
        out.append(("lambda/ephemeral-storage", f"EphemeralStorage {storage!r}: 512-10,240 MB"))
    return out


# ---------------------------------------------------------------- CloudFront Functions
# Parses and runs the code's top level in a fresh context (as CloudFront does when it publishes),
# then requires a `handler` function. `import cf from 'cloudfront'` (KeyValueStore, JS 2.0) is
# module syntax: it is replaced by a stub first.
_NODE_CHECK = """
const vm = require('vm');
let code = '';
process.stdin.on('data', (d) => (code += d)).on('end', () => {
  code = code.replace(/^\\s*import\\s+(\\w+)\\s+from\\s+['"]cloudfront['"];?/m, 'var $1 = {};');
  try {
    const context = vm.createContext({});
    new vm.Script(code, { filename: 'cloudfront-function.js' }).runInContext(context, { timeout: 1000 });
    if (typeof context.handler !== 'function') throw new Error('no function named handler');
  } catch (e) {
    process.stderr.write(String(e && e.stack ? e.stack.split('\\n').slice(0, 3).join(' | ') : e));
    process.exit(1);
  }
});
"""


@functools.lru_cache(maxsize=32)
def javascript_error(code: str) -> str | None:
    """None when ``node`` parses the code and finds ``handler``, else why not (one node run per code)."""
    node = shutil.which("node")
    if node is None:
        return "node is not installed (the CDK needs it anyway): the code could not be checked"
    proc = subprocess.run(
        [node, "-e", _NODE_CHECK], input=code, capture_output=True, text=True, timeout=60, check=False
    )
    return None if proc.returncode == 0 else (proc.stderr.strip() or f"node exited {proc.returncode}")


def cloudfront_functions(template: dict[str, Any], wc: WorstCase) -> list[Finding]:
    out = []
    for lid, props in resources(template, "AWS::CloudFront::Function").items():
        try:
            code = wc.string(props.get("FunctionCode", ""))
        except Unestimable as exc:
            out.append(_unknown(lid, exc))
            continue
        size = len(code.encode())
        if size > CF_FUNCTION_MAX:
            out.append(
                Finding(
                    rule="cloudfront/function-size",
                    resource=lid,
                    message=f"function code is {size:,} bytes; CloudFront Functions take at most {CF_FUNCTION_MAX:,}",
                )
            )
        runtime = props.get("FunctionConfig", {}).get("Runtime")
        if runtime != CF_RUNTIME:
            out.append(
                Finding(
                    rule="cloudfront/function-runtime",
                    resource=lid,
                    message=f"Runtime {runtime!r}: {CF_RUNTIME}",
                )
            )
        error = javascript_error(code)
        if error:
            out.append(Finding(rule="cloudfront/function-parse", resource=lid, message=error))
    return out


# ---------------------------------------------------------------- IAM and S3 policies
def policy_size(document: Any, wc: WorstCase) -> int:
    """IAM's measure: characters of the policy JSON, white space not counted."""
    rendered = json.dumps(wc.render(document), separators=(",", ":"), ensure_ascii=False)
    return len(re.sub(r"\s", "", rendered))


def iam_policies(template: dict[str, Any], wc: WorstCase) -> list[Finding]:
    out = []
    try:
        out += _inline_policies(template, wc)
        out += _managed_policies(template, wc)
        out += _trust_policies(template, wc)
    except Unestimable as exc:
        out.append(_unknown("IAM", exc))
    return out


def _attached(props: dict[str, Any], key: str) -> list[str]:
    """Logical ids of the roles (users, groups) a policy resource attaches to by ``Ref``."""
    return [r["Ref"] for r in props.get(key, []) if isinstance(r, dict) and "Ref" in r]


def _inline_policies(template: dict[str, Any], wc: WorstCase) -> list[Finding]:
    """The aggregate of a role's (user's, group's) inline policies: its own Policies and AWS::IAM::Policy."""
    totals: dict[tuple[str, str], list[int]] = {}
    for key, kind in (
        ("Roles", "AWS::IAM::Role"),
        ("Users", "AWS::IAM::User"),
        ("Groups", "AWS::IAM::Group"),
    ):
        for lid, props in resources(template, kind).items():
            sizes = totals.setdefault((key, lid), [])
            sizes += [policy_size(p.get("PolicyDocument"), wc) for p in props.get("Policies", [])]
    for props in resources(template, "AWS::IAM::Policy").values():
        size = policy_size(props.get("PolicyDocument"), wc)
        for key in IAM_INLINE_MAX:
            for lid in _attached(props, key):
                totals.setdefault((key, lid), []).append(size)
    return [
        Finding(
            rule="iam/inline-policy-size",
            resource=lid,
            message=f"its {len(sizes)} inline policies take {sum(sizes):,} characters (white space not "
            f"counted); IAM takes at most {IAM_INLINE_MAX[key]:,} for one of its {key.lower()}",
        )
        for (key, lid), sizes in totals.items()
        if sum(sizes) > IAM_INLINE_MAX[key]
    ]


def _managed_policies(template: dict[str, Any], wc: WorstCase) -> list[Finding]:
    out = []
    per_role = {
        lid: len(p.get("ManagedPolicyArns", [])) for lid, p in resources(template, "AWS::IAM::Role").items()
    }
    for lid, props in resources(template, "AWS::IAM::ManagedPolicy").items():
        size = policy_size(props.get("PolicyDocument"), wc)
        if size > IAM_MANAGED_MAX:
            out.append(
                Finding(
                    rule="iam/managed-policy-size",
                    resource=lid,
                    message=f"{size:,} characters (white space not counted); a managed policy takes at most "
                    f"{IAM_MANAGED_MAX:,}",
                )
            )
        for role in _attached(props, "Roles"):
            per_role[role] = per_role.get(role, 0) + 1
    out += [
        Finding(
            rule="iam/managed-policy-count",
            resource=lid,
            message=f"{count} managed policies; a role takes {IAM_MANAGED_PER_ROLE} (the default quota)",
        )
        for lid, count in per_role.items()
        if count > IAM_MANAGED_PER_ROLE
    ]
    return out


def _trust_policies(template: dict[str, Any], wc: WorstCase) -> list[Finding]:
    out = []
    for lid, props in resources(template, "AWS::IAM::Role").items():
        size = policy_size(props.get("AssumeRolePolicyDocument"), wc)
        if size > IAM_TRUST_MAX:
            out.append(
                Finding(
                    rule="iam/trust-policy-size",
                    resource=lid,
                    message=f"trust policy of {size:,} characters; IAM takes {IAM_TRUST_MAX:,} (the default quota)",
                )
            )
    return out


def s3_bucket_policies(template: dict[str, Any], wc: WorstCase) -> list[Finding]:
    out = []
    for lid, props in resources(template, "AWS::S3::BucketPolicy").items():
        try:
            size = len(json.dumps(wc.render(props.get("PolicyDocument")), separators=(",", ":")).encode())
        except Unestimable as exc:
            out.append(_unknown(lid, exc))
            continue
        if size > S3_BUCKET_POLICY_MAX:
            out.append(
                Finding(
                    rule="s3/bucket-policy-size",
                    resource=lid,
                    message=f"bucket policy of {size:,} bytes; S3 takes at most {S3_BUCKET_POLICY_MAX:,}",
                )
            )
    return out


# ---------------------------------------------------------------- Step Functions
def rendered_definition(props: dict[str, Any], wc: WorstCase) -> str:
    """The definition CloudFormation hands CreateStateMachine: substitutions applied at their worst case."""
    if "Definition" in props:
        text = json.dumps(wc.render(props["Definition"]))
    elif "DefinitionString" in props:
        text = wc.string(props["DefinitionString"])
    else:
        raise Unestimable("a definition in S3 (DefinitionS3Location) is not checked here")
    for key, value in props.get("DefinitionSubstitutions", {}).items():
        text = text.replace("${" + key + "}", wc.string(value))
    return text


def state_machines(template: dict[str, Any], wc: WorstCase) -> list[Finding]:
    out = []
    for lid, props in resources(template, "AWS::StepFunctions::StateMachine").items():
        try:
            text = rendered_definition(props, wc)
        except Unestimable as exc:
            out.append(_unknown(lid, exc))
            continue
        out += [f.within(lid) for f in check_definition_text(text)]
    return out
