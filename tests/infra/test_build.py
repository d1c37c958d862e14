"""Building blocks without a full synth: assets, the layer build, permissions, the ASL for CloudFormation."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from packaging.requirements import Requirement

from infra import assets, permissions
from infra import constants as C
from skyloop import manifest

ROOT = manifest.PROJECT_ROOT


def test_every_manifest_function_has_declared_access() -> None:
    names = {f.name for f in manifest.FUNCTIONS}
    assert set(permissions.TABLE_ACCESS) == names
    assert set(permissions.TURN_ACCESS) <= names


def test_declared_table_access_is_explicit_and_scannable_by_nobody() -> None:
    from skyloop.store import schema

    for name, access in permissions.TABLE_ACCESS.items():
        # Then every action is a plain DynamoDB action, listed once, with no wildcard
        assert all(a.startswith("dynamodb:") and "*" not in a for a in access.actions), name
        assert len(set(access.actions)) == len(access.actions), name
        # And no function scans (the operator's token list and the local TTL sweep do)
        assert "dynamodb:Scan" not in access.actions, name
        # And the indexes named are the table's own
        assert set(access.indexes) <= set(schema.INDEXES), name


@pytest.mark.parametrize("decision", ["TABLE_ACCESS", "BLOB_ACCESS"])
def test_a_function_without_declared_access_stops_synth(
    monkeypatch: pytest.MonkeyPatch, decision: str
) -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_s3 as s3

    from infra.config import StackConfig
    from infra.constructs.functions import Functions

    # Given the manifest gains a function nobody gave table (or blob) access to
    monkeypatch.delitem(getattr(permissions, decision), "turn")
    stack = cdk.Stack(cdk.App())
    table = dynamodb.Table.from_table_name(stack, "T", "t")
    bucket = s3.Bucket.from_bucket_name(stack, "B", "blobs")
    # Then building the functions fails and names it
    with pytest.raises(ValueError, match="turn"):
        Functions(stack, "Functions", table=table, bucket=bucket, config=StackConfig())


def test_secret_access_for_an_unknown_function_stops_synth(monkeypatch: pytest.MonkeyPatch) -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_s3 as s3

    from infra.config import StackConfig
    from infra.constructs.functions import Functions

    monkeypatch.setitem(permissions.SECRET_ACCESS, "tunr", permissions.SECRET_ACCESS["turn"])
    stack = cdk.Stack(cdk.App())
    table = dynamodb.Table.from_table_name(stack, "T", "t")
    bucket = s3.Bucket.from_bucket_name(stack, "B", "blobs")
    with pytest.raises(ValueError, match="tunr"):
        Functions(stack, "Functions", table=table, bucket=bucket, config=StackConfig())


def test_runtime_matches_the_layer_python() -> None:
    from infra.constructs.functions import RUNTIME

    assert RUNTIME.name == f"python{C.LAMBDA_PYTHON_VERSION}"


def test_staged_code_holds_handler_and_package() -> None:
    spec = manifest.by_name("api")
    staged = assets.stage_function(spec)
    assert (staged / "handler.py").read_text() == spec.handler_file.read_text()
    assert (staged / "skyloop" / "store" / "schema.py").is_file()
    assert not (staged / "skyloop" / "local").exists()


def test_layer_folder_is_used_when_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "python").mkdir()
    monkeypatch.setenv(assets.LAYER_DIR_ENV, str(tmp_path))
    assert assets.layer_dir() == (tmp_path, True)


def test_missing_layer_falls_back_to_a_placeholder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(assets.LAYER_DIR_ENV, str(tmp_path / "missing"))
    folder, built = assets.layer_dir()
    assert built is False
    assert (folder / "python").is_dir()


def _dry_run(*args: str) -> list[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "layers" / "build.py"), "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()


def test_layer_build_installs_the_lock_as_wheels_for_lambda_only() -> None:
    # Given the build script in dry-run mode (no network)
    out = _dry_run()
    # Then pip installs binary wheels for arm64 CPython 3.12 into layers/build/python
    assert out[out.index("--platform") + 1] == "manylinux2014_aarch64"
    assert "--only-binary=:all:" in out
    assert out[out.index("--python-version") + 1] == C.LAMBDA_PYTHON_VERSION
    assert out[out.index("--implementation") + 1] == "cp"
    assert Path(out[out.index("-t") + 1]) == ROOT / "layers" / "build" / "python"
    # And exactly the lock, resolving nothing at build time
    assert Path(out[out.index("-r") + 1]) == ROOT / "layers" / "requirements.lock"
    assert "--no-deps" in out
    # And no bytecode from pip's own interpreter (3.12 bytecode is compiled afterwards)
    assert "--no-compile" in out


def test_host_build_uses_the_same_lock_for_this_machine() -> None:
    out = _dry_run("--host")
    assert "--platform" not in out
    assert out[out.index("--python-version") + 1] == C.LAMBDA_PYTHON_VERSION
    assert Path(out[out.index("-r") + 1]) == ROOT / "layers" / "requirements.lock"
    assert "--no-deps" in out


class TestLock:
    """``layers/requirements.lock``: what the layer installs, every package pinned."""

    LOCK = ROOT / "layers" / "requirements.lock"
    RUNTIME_LOCK = ROOT / "layers" / "runtime.lock"

    @staticmethod
    def _requirements(path: Path) -> list[Requirement]:
        from packaging.requirements import Requirement

        lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
        return [Requirement(line) for line in lines if line]

    def _pins(self, path: Path) -> dict[str, str]:
        from packaging.utils import canonicalize_name

        out: dict[str, str] = {}
        for r in self._requirements(path):
            (spec,) = r.specifier  # exactly one specifier, and it is ==
            assert spec.operator == "==", r
            assert "*" not in spec.version, r
            assert r.marker is None, r
            assert r.url is None, r
            name = canonicalize_name(r.name)
            assert name not in out, f"{name} pinned twice"
            out[name] = spec.version
        return out

    def test_every_package_is_pinned_exactly(self) -> None:
        assert len(self._pins(self.LOCK)) > 10
        assert self._pins(self.RUNTIME_LOCK)

    def test_lock_covers_requirements_txt(self) -> None:
        from packaging.utils import canonicalize_name

        pins = self._pins(self.LOCK)
        locked = {canonicalize_name(r.name): r for r in self._requirements(self.LOCK)}
        for wanted in self._requirements(ROOT / "layers" / "requirements.txt"):
            name = canonicalize_name(wanted.name)
            # Then each requirement is pinned at a version it admits, with its extras
            assert name in pins, wanted
            assert wanted.specifier.contains(pins[name], prereleases=True), (wanted, pins[name])
            assert wanted.extras <= locked[name].extras, wanted

    def test_the_tracer_extra_is_in_the_layer(self) -> None:
        # `-c powertoolsTracer=true` builds Powertools' Tracer, which imports the X-Ray SDK
        (powertools,) = [
            r
            for r in self._requirements(ROOT / "layers" / "requirements.txt")
            if r.name == "aws-lambda-powertools"
        ]
        assert "tracer" in powertools.extras
        assert {"aws-xray-sdk", "wrapt"} <= set(self._pins(self.LOCK))

    def test_the_runtime_sdk_stays_out_of_the_layer(self) -> None:
        # boto3 and botocore come with the Lambda runtime; a layer copy would shadow its botocore
        layer, runtime = self._pins(self.LOCK), self._pins(self.RUNTIME_LOCK)
        assert not {"boto3", "botocore", "s3transfer", "urllib3"} & set(layer)
        assert {"boto3", "botocore", "s3transfer"} <= set(runtime)
        # And packages in both are pinned alike
        assert all(layer[n] == runtime[n] for n in set(layer) & set(runtime))


class TestCloudFormationDefinition:
    """``${name}`` in a definition must be a substitution key; prose in comments is defused."""

    @staticmethod
    def _defuse(text: str, keys: set[str]) -> str:
        from infra.constructs.turn_machine import cloudformation_definition

        return cloudformation_definition(text, keys)

    def test_known_placeholders_pass_unchanged(self) -> None:
        text = (
            '{"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": "${AFunctionArn}", "End": true}}}'
        )
        assert self._defuse(text, {"AFunctionArn"}) == text

    def test_prose_placeholders_in_comments_are_defused(self) -> None:
        text = '{"Comment": "uses ${...FunctionArn}", "StartAt": "A", "States": {"A": {"Type": "Pass", "End": true}}}'
        assert self._defuse(text, set()) == text.replace("${...FunctionArn}", "$(...FunctionArn)")

    def test_unknown_placeholders_in_states_stop_synth(self) -> None:
        text = '{"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": "${Typo}", "End": true}}}'
        with pytest.raises(ValueError, match="Typo"):
            self._defuse(text, {"AFunctionArn"})


class TestStreamEntryPoint:
    """``functions/stream/run.sh`` run by bash with a stub ``python`` that reports what it was given."""

    STUB = '#!/bin/sh\nprintf "%s\\n" "$PYTHONPATH" "$*"\n'

    def _run(self, tmp_path: Path, **env: str) -> tuple[str, str]:
        bash = shutil.which("bash")
        assert bash, "bash is needed to run run.sh"
        stub_dir = tmp_path / "stub"
        stub_dir.mkdir()
        (stub_dir / "python").write_text(self.STUB)
        (stub_dir / "python").chmod(0o755)
        run_sh = manifest.by_name("stream").handler_file
        out = subprocess.run(
            [bash, str(run_sh)],
            env={"PATH": f"{stub_dir}:/usr/bin:/bin", "LAMBDA_TASK_ROOT": "/var/task", **env},
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.splitlines()
        return out[0], out[1]

    def test_the_runtimes_pythonpath_survives(self, tmp_path: Path) -> None:
        # Given Lambda's own PYTHONPATH in the environment
        pythonpath, _ = self._run(tmp_path, PYTHONPATH="/var/runtime:/opt/extra")
        # Then the task root and the layer come first and the runtime's entries follow
        assert pythonpath == "/var/task:/opt/python:/var/runtime:/opt/extra"

    def test_no_empty_entry_without_a_pythonpath(self, tmp_path: Path) -> None:
        # An empty entry would put the working directory on sys.path
        pythonpath, _ = self._run(tmp_path)
        assert pythonpath == "/var/task:/opt/python"

    def test_uvicorn_serves_the_stream_app_on_the_adapter_port(self, tmp_path: Path) -> None:
        _, args = self._run(tmp_path, AWS_LWA_PORT="9001")
        assert args.split() == [
            "-m",
            "uvicorn",
            "--host",
            "127.0.0.1",
            "--port=9001",
            "--log-level",
            "warning",
            "skyloop.stream:app",
        ]


def test_cdk_floor_admits_only_releases_that_grant_invoke_function_to_cloudfront() -> None:
    import tomllib
    from importlib.metadata import version

    from packaging.requirements import Requirement
    from packaging.version import Version

    # Given the aws-cdk-lib requirement of the cdk extra
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["cdk"]
    (cdk_lib,) = [Requirement(r) for r in extra if Requirement(r).name == "aws-cdk-lib"]
    floor = Version(C.CDK_MIN_VERSION)
    # Then no release before the one with the dual-auth grant is admitted (2.272.0 grants only
    # lambda:InvokeFunctionUrl), and that release is
    assert not cdk_lib.specifier.contains("2.272.0")
    assert not cdk_lib.specifier.contains("2.170.0")
    assert cdk_lib.specifier.contains(str(floor))
    # And the installed CDK is one of them
    assert Version(version("aws-cdk-lib")) >= floor
