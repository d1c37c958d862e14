"""Build the Lambda dependencies layer: wheels for Lambda's platform, no Docker.

    python layers/build.py            # -> layers/build/python/...
    python layers/build.py --dry-run  # print the pip command only

Installs ``layers/requirements.txt`` for the functions' runtime (CPython and
architecture from ``infra/constants.py``) with ``--only-binary=:all:``, so pip
never compiles anything for the build machine. boto3 is left out on purpose:
the Lambda runtime provides it. The CDK stack packages ``layers/build`` as the
layer; without it, synth uses a placeholder and warns.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra.constants import LAMBDA_PYTHON_VERSION, LAYER_IMPLEMENTATION, LAYER_PLATFORM  # noqa: E402

REQUIREMENTS = ROOT / "layers" / "requirements.txt"
BUILD_DIR = ROOT / "layers" / "build"


def pip_command(target: Path, requirements: Path = REQUIREMENTS) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--platform",
        LAYER_PLATFORM,
        "--only-binary=:all:",
        "--python-version",
        LAMBDA_PYTHON_VERSION,
        "--implementation",
        LAYER_IMPLEMENTATION,
        "--upgrade",
        "-t",
        str(target),
        "-r",
        str(requirements),
    ]


def _prune(site: Path) -> None:
    """Drop bytecode caches: Lambda compiles on first import and they only grow the zip."""
    for cache in site.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the pip command and exit")
    parser.add_argument("--out", type=Path, default=BUILD_DIR, help="layer folder (default: layers/build)")
    args = parser.parse_args(argv)

    site = args.out / "python"  # Lambda puts /opt/python on sys.path
    command = pip_command(site)
    if args.dry_run:
        print(" ".join(command))
        return 0
    staging = args.out.with_name(args.out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    result = subprocess.run(pip_command(staging / "python"), check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        return result.returncode
    _prune(staging / "python")
    shutil.rmtree(args.out, ignore_errors=True)
    staging.rename(args.out)
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(
        f"layer built in {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out} "
        f"({size / 1e6:.1f} MB unzipped)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
