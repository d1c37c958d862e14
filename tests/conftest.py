"""Every test process: loopback allowed for the mock servers, and how `make test` spreads the suite.

``skyloop dev`` allows loopback model and MCP URLs itself (``skyloop.outbound``);
tests that build the store or turn steps in-process get the same allowance
here. ``tests/unit/test_outbound.py`` checks the refusals with explicit settings.

``make test`` runs pytest-xdist workers (``-n``, see the Makefile). A worker
takes a whole test file at a time, so a file's module fixtures (a ``skyloop
dev`` stack, a synthesized template) are built once per worker that runs it;
the files in :data:`SPLIT` are shared out one test at a time instead (their
tests are long and each builds what it needs), the folders in :data:`WHOLE`
go to one worker together (their session fixtures are dear), and the
infra suite's synthesis is shared by every worker (``tests/infra/conftest.py``).
Files start longest first (:data:`SECONDS`), so that the short ones fill in at
the end rather than one long file finishing alone.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("SKYLOOP_OUTBOUND_ALLOW_LOOPBACK", "true")

# What the slowest files (and the browser folder) take, in seconds on the 2-core machine under three
# workers (pytest --junitxml, 2026-12-07, after issue 36's second pass): only their order matters, so round
# figures do.
SECONDS: dict[str, int] = {
    "tests/e2e/test_persistence.py": 95,  # shared out test by test (SPLIT)
    "tests/e2e/test_fuzz.py": 75,  # shared out test by test (SPLIT)
    "tests/e2e/test_schedules.py": 60,
    "tests/browser/test_console.py": 57,  # the browser folder, taken whole (WHOLE)
    "tests/browser/test_schedules.py": 57,
    "tests/browser/test_workspace.py": 57,
    "tests/integration/test_turn_machine.py": 53,
    "tests/e2e/test_data_dir.py": 42,
    "tests/e2e/test_webhooks.py": 41,
    "tests/e2e/test_smoke.py": 34,
    "tests/infra/test_artifact_turn.py": 33,
    "tests/integration/test_anthropic_agents.py": 27,
    "tests/infra/test_deploy_limits.py": 27,
    "tests/integration/test_hosted_tools.py": 23,
    "tests/e2e/test_hosted.py": 23,
}
# Files whose tests are shared out one by one (each test is long and needs no other test's state).
SPLIT = frozenset({"tests/e2e/test_fuzz.py", "tests/e2e/test_persistence.py"})
# Folders taken whole by one worker: their session fixtures are dear (the browser suite's two stacks
# and Chromium) and would be built again by each worker that ran one of their files.
WHOLE = ("tests/browser/",)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


# Suites whose turns and stores run in other processes (skyloop dev, omnigent's clients, Chromium) or from
# built artifacts (infra): a --cov run of skyloop.turns and skyloop.store (make coverage) cannot see them
# there, and tracing the test's own side (the fuzzer's generation, the SDKs, CDK) only costs time (the
# fuzz file: 67 s untraced, 106 s traced).
UNTRACED = ("tests/e2e/", "tests/compat/", "tests/browser/", "tests/infra/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest files first (a stable sort: every file keeps its own order); no coverage where it sees nothing."""
    items.sort(key=lambda item: -SECONDS.get(_file_of(item.nodeid), 0))
    for item in items:
        if item.nodeid.startswith(UNTRACED):
            item.add_marker(pytest.mark.no_cover)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """A file per work unit, in collection order (longest first); the files in SPLIT test by test, each WHOLE
    folder as one unit."""
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False  # keep the longest-first order above

        def _split_scope(self, nodeid: str) -> str:
            path = _file_of(nodeid)
            if path in SPLIT:
                return nodeid
            return next((folder for folder in WHOLE if path.startswith(folder)), path)

    return FileScheduling(config, log)
