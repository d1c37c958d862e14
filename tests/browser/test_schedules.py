"""The console's Schedules screen (``/schedules``) in headless Chromium against ``skyloop dev``.

Scheduled tasks are docs/schedules.md's ``/v1/scheduled-tasks``: the tests create, run, pause,
resume and delete one from the page and check each step against what the API holds.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

    from tests.browser.conftest import Stack

pytestmark = pytest.mark.e2e


def uid() -> str:
    return uuid.uuid4().hex[:8]


def task(stack: Stack, name: str) -> dict[str, Any]:
    with stack.client() as c:
        found = [t for t in c.get("/v1/scheduled-tasks").json()["scheduled_tasks"] if t["name"] == name]
    assert len(found) == 1, found
    return dict(found[0])


def runs(stack: Stack, task_id: str) -> list[dict[str, Any]]:
    with stack.client() as c:
        r = c.get(f"/v1/scheduled-tasks/{task_id}/runs")
        r.raise_for_status()
        return list(r.json()["runs"])


def wait_gate(stack: Stack, timeout_s: float = 20) -> None:
    """Until the mock model holds a request at its gate (a release before it comes would be lost)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if httpx.get(f"{stack.direct}/_mock/gate/pending", timeout=5).json().get("pending"):
            return
        time.sleep(0.1)


def task_row(page: Page, name: str) -> Locator:
    """The task's own row (the run history opens in a row of its own below it)."""
    return page.get_by_role("row").filter(has_text=name).filter(has=page.get_by_test_id("next-run"))


def open_schedules(page: Page) -> None:
    page.get_by_role("link", name="Schedules", exact=True).click()
    page.get_by_role("heading", name="Schedules", exact=True).wait_for()


def test_create_run_pause_resume_and_delete_a_scheduled_task(page: Page, stack: Stack) -> None:
    model = f"mock-sched-{uid()}"
    agent = f"scheduled-{uid()}"
    agent_id = stack.agent(agent, model)
    # the first run waits at the mock's gate, so run now meets a running run (409); then it answers
    stack.mock(model, [{"block": True, "text": "The scheduled answer."}])
    name = f"Nightly summary {uid()}"
    sign_in(page, stack)
    open_schedules(page)

    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Agent", exact=True).select_option(label=agent)
    page.get_by_label("Rule (RRULE)").fill("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8")
    expect(page.get_by_label("Rule (RRULE)")).to_have_accessible_description("Every weekday at 08:00")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    page.get_by_label("Prompt").fill("Summarize the night's alerts.")
    page.get_by_label("Name", exact=True).press("Enter")  # the form submits from the keyboard
    page.get_by_role("status").filter(has_text=f"Created {name}.").wait_for()

    created = task(stack, name)
    assert created["agent_id"] == agent_id
    assert created["timezone"] == "Europe/Berlin"
    assert created["state"] == "active"
    assert created["next_run_at"]
    row = task_row(page, name)
    for text in (agent, "Every weekday at 08:00", "Europe/Berlin", "active", "never"):
        row.get_by_role("cell").filter(has_text=text).first.wait_for()
    next_run = row.get_by_test_id("next-run").inner_text()
    assert "8:00" in next_run, next_run  # the task's own wall clock, whatever the browser's zone
    assert created["next_run_at"][:4] in next_run

    try:
        page.get_by_role("button", name=f"Run now: {name}").click()
        page.get_by_role("status").filter(has_text=f"Started a run of {name}.").wait_for()
        history = page.get_by_role("table", name=f"Runs of {name}")
        history.get_by_role("cell").filter(has_text="running").wait_for()
        # a second run now while the first still runs: the 409 as a sentence
        page.get_by_role("button", name=f"Run now: {name}").click()
        alert = page.get_by_role("alert")
        expect(alert).to_have_text(
            f"{name} is already running: run it again once its current run has finished."
        )
        assert len(runs(stack, created["id"])) == 1
    finally:
        wait_gate(stack)
        stack.release_gate()

    history.get_by_role("cell").filter(has_text="succeeded").wait_for(timeout=30_000)
    (run,) = runs(stack, created["id"])
    assert run["status"] == "succeeded"
    assert run["trigger"] == "manual"
    history.get_by_role("cell").filter(has_text="run now").wait_for()
    session_link = history.get_by_role("link", name="Session of the succeeded run")
    assert session_link.get_attribute("href") == f"/sessions/{run['conversation_id']}"
    # the list's last run follows (it refreshes every 5 s)
    last = row.get_by_role("link", name=f"Session of the last run of {name}")
    expect(last).to_have_attribute("href", f"/sessions/{run['conversation_id']}", timeout=15_000)
    row.get_by_role("cell").filter(has_text="succeeded").wait_for()
    session_link.click()
    page.locator("[data-kind=assistant]").filter(has_text="The scheduled answer.").wait_for()
    assert page.url.endswith(f"/sessions/{run['conversation_id']}")
    page.go_back()
    page.get_by_role("heading", name="Schedules", exact=True).wait_for()

    # pause and resume from the keyboard
    pause = page.get_by_role("button", name=f"Pause {name}")
    pause.focus()
    page.keyboard.press("Enter")
    page.get_by_role("status").filter(has_text=f"Paused {name}.").wait_for()
    row.get_by_role("cell").filter(has_text="paused").wait_for()
    expect(row.get_by_test_id("next-run")).to_have_text("—")
    assert task(stack, name)["state"] == "paused"
    assert task(stack, name)["next_run_at"] is None
    page.get_by_role("button", name=f"Resume {name}").click()
    page.get_by_role("status").filter(has_text=f"Resumed {name}.").wait_for()
    expect(row.get_by_test_id("next-run")).not_to_have_text("—")
    assert task(stack, name)["state"] == "active"

    # delete asks first; "Keep it" keeps it, the confirmation (focused) deletes
    page.get_by_role("button", name=f"Delete {name}").click()
    dialog = page.get_by_role("alertdialog", name=f"Delete {name}?")
    dialog.get_by_role("button", name="Keep it").click()
    dialog.wait_for(state="detached")
    expect(page.get_by_role("button", name=f"Delete {name}")).to_be_focused()
    assert task(stack, name)["id"] == created["id"]
    page.get_by_role("button", name=f"Delete {name}").click()
    expect(dialog.get_by_role("button", name="Delete task")).to_be_focused()
    page.keyboard.press("Enter")
    page.get_by_role("status").filter(has_text=f"Deleted {name}.").wait_for()
    task_row(page, name).wait_for(state="detached")
    with stack.client() as c:
        assert c.get(f"/v1/scheduled-tasks/{created['id']}").status_code == 404
        assert c.get(f"/v1/sessions/{run['conversation_id']}").status_code == 200  # its run's session stays


def test_a_bad_rule_is_refused_with_the_servers_reason(page: Page, stack: Stack) -> None:
    sign_in(page, stack)
    open_schedules(page)
    page.get_by_label("Name", exact=True).fill(f"too often {uid()}")
    page.get_by_label("Agent", exact=True).select_option(label="coder")
    page.get_by_label("Rule (RRULE)").fill("FREQ=SECONDLY")
    expect(page.get_by_label("Rule (RRULE)")).to_have_accessible_description(
        "A rule the server reads (RFC 5545)"
    )
    page.get_by_label("Prompt").fill("hello")
    page.get_by_role("button", name="Create task").click()
    page.get_by_role("alert").filter(has_text="rrule").wait_for()


def test_read_only_token_sees_tasks_and_runs_without_controls(page: Page, stack: Stack) -> None:
    name = f"Read me {uid()}"
    with stack.client() as c:
        coder = next(
            a for a in c.get("/v1/agents?scope=user&limit=100").json()["data"] if a["name"] == "coder"
        )
        body = {"name": name, "agent_id": coder["id"], "prompt": "hello", "rrule": "FREQ=HOURLY"}
        created = c.post("/v1/scheduled-tasks", json=body)
        assert created.status_code == 200, created.text
        task_id = created.json()["id"]
        assert c.post(f"/v1/scheduled-tasks/{task_id}/run").status_code == 202
    deadline = time.monotonic() + 30
    while runs(stack, task_id)[0]["status"] != "succeeded" and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        sign_in(page, stack, stack.tokens["read"])
        open_schedules(page)
        row = task_row(page, name)
        row.get_by_role("cell").filter(has_text="Every hour at :00").wait_for()
        assert page.get_by_role("form", name="New scheduled task").count() == 0
        assert page.get_by_role("button", name="Create task").count() == 0
        for action in (f"Run now: {name}", f"Pause {name}", f"Delete {name}"):
            assert page.get_by_role("button", name=action).count() == 0, action
        page.get_by_role("button", name=f"Runs of {name}").click()
        history = page.get_by_role("table", name=f"Runs of {name}")
        history.get_by_role("link", name="Session of the succeeded run").wait_for()
    finally:
        with stack.client() as c:
            c.delete(f"/v1/scheduled-tasks/{task_id}")
