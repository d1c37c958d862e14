"""Property-based fuzzing of the API from its own OpenAPI document: whatever a client sends, never a 5xx.

schemathesis reads ``/openapi.json`` from a ``skyloop dev`` of this module's
own and generates requests for every operation, valid ones and ones that break
the schema (wrong types, missing fields, out-of-range values, odd strings in
paths and queries). Each is sent with its made-up ids (mostly 404s, which must
stay 404s) and again with the ids of a real agent, session and runner, so
generated bodies reach the code behind the lookups. The stream, which is not in the document,
gets its cursor inputs fuzzed by Hypothesis directly.
"""

from __future__ import annotations

import os
import string
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.control import SkipTest
from schemathesis.transport.requests import ManagedCookiesSession

from tests.e2e.conftest import upload_agent

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.e2e.conftest import DevProcess

# Derandomized so CI sees the same cases every run; SKYLOOP_FUZZ_RANDOM=1 explores new ones (and
# SKYLOOP_FUZZ_EXAMPLES more of them), which is how the empty-api_key 500 was found.
FUZZ = settings(
    max_examples=int(os.environ.get("SKYLOOP_FUZZ_EXAMPLES", "40")),
    deadline=None,
    database=None,
    derandomize=os.environ.get("SKYLOOP_FUZZ_RANDOM") != "1",
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def fuzz_url(skyloop_dev_factory: Callable[..., DevProcess]) -> str:
    return skyloop_dev_factory().ready()


@pytest.fixture(scope="module")
def real_ids(fuzz_url: str) -> dict[str, str]:
    """An agent, its idle session and the default runner: ids the fuzzer's cases are pointed at."""
    with httpx.Client(base_url=fuzz_url, timeout=30) as client:
        spec = '{"name": "fuzzed", "executor": {"harness": "openai-agents", "model": "mock-fuzz"}}'
        created = upload_agent(client, {"fuzzed.yaml": spec})
        runner = client.get("/v1/runners").json()["data"][0]["runner_id"]
    return {"agent_id": created["agent_id"], "session_id": created["session_id"], "runner_id": runner}


def operations(fuzz_url: str, mode: GenerationMode) -> list[Any]:
    """The document's operations, configured for ``mode`` alone: then an operation with nothing that can be made
    invalid (most: a free-form string id and no body) says so at its first draw, where with both modes
    enabled Hypothesis gave up only after ~460 rejected draws (0.7 s an operation, for 81 of 107)."""
    schema = schemathesis.openapi.from_url(f"{fuzz_url}/openapi.json")
    schema.config.generation.update(modes=[mode])
    return [result.ok() for result in schema.get_all_operations()]


def fuzz(fuzz_url: str, mode: GenerationMode, call: Callable[[Any], list[Any]]) -> list[str]:
    """Run every operation's generated cases through ``call``; the 5xx answers, described."""
    server_errors: list[str] = []
    impossible: list[Any] = []
    every = operations(fuzz_url, mode)
    for operation in every:

        @given(case=operation.as_strategy(generation_mode=mode))
        @FUZZ
        def run(case: Any) -> None:
            for resp in call(case):
                if resp.status_code >= 500:
                    server_errors.append(
                        f"{case.method.upper()} {case.formatted_path} query={case.query} "
                        f"body={str(case.body)[:200]} -> {resp.status_code} {resp.text[:200]}"
                    )

        try:
            run()
        except SkipTest:  # nothing in this operation can be made invalid (e.g. a free-form string id)
            assert mode is GenerationMode.NEGATIVE, operation.path
            impossible.append(operation)
    # A floor, so that a schemathesis that skipped everything would not pass unseen: 26 of 107 operations
    # had negative cases when this was written (the others are a free-form id and no body).
    assert len(every) - len(impossible) >= 20, f"{len(impossible)} of {len(every)} operations had no case"
    return server_errors


@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: m.value)
def test_no_request_with_made_up_or_real_ids_gets_a_server_error(
    fuzz_url: str, real_ids: dict[str, str], mode: GenerationMode
) -> None:
    """Each generated case is sent twice: with its made-up ids (mostly 404s, which must stay 404s), then,
    but for a DELETE (the real session must stay), aimed at the real agent, session and runner, so its
    body reaches the code behind the lookups. Generating is most of the cost: each case serves both."""

    def both(case: Any) -> list[Any]:
        answers = [send(fuzz_url, case)]
        if case.method.upper() != "DELETE":
            if case.path_parameters:
                case.path_parameters = {k: real_ids.get(k, v) for k, v in case.path_parameters.items()}
            answers.append(send(fuzz_url, case))
        return answers

    errors = fuzz(fuzz_url, mode, both)
    assert not errors, "\n".join(errors[:10])


# One connection for every case (a session per case, as ``case.call`` makes by default, cost a new connection
# and a read of the proxy and CA variables each time); its cookies are dropped between cases as by default.
_SESSION = ManagedCookiesSession()
_SESSION.trust_env = False


def send(base_url: str, case: Any) -> Any:
    """The case sent by schemathesis's own transport (it serializes every media type the document names)."""
    return case.call(base_url=base_url, session=_SESSION, timeout=30)


CURSOR_CHARS = string.ascii_letters + string.digits + string.punctuation + " \t"


@given(
    after=st.one_of(
        st.none(), st.text(max_size=40), st.integers(min_value=-(10**20), max_value=10**20).map(str)
    ),
    last_event_id=st.one_of(
        st.none(), st.text(alphabet=CURSOR_CHARS, max_size=40).map(str.strip)
    ),  # as h11 sends
)
@FUZZ
def test_no_stream_cursor_gets_a_server_error(
    fuzz_url: str, real_ids: dict[str, str], after: str | None, last_event_id: str | None
) -> None:
    params = {"after": after} if after is not None else None
    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else None
    url = f"{fuzz_url}/v1/sessions/{real_ids['session_id']}/stream"
    with httpx.stream("GET", url, params=params, headers=headers, timeout=30) as resp:
        assert resp.status_code < 500, (
            resp.status_code,
            resp.read()[:300],
        )  # read only the status, then hang up
        if resp.status_code >= 400:
            body = resp.read()
            assert resp.headers["content-type"].startswith("application/json"), body[:300]
            assert "error" in resp.json()
