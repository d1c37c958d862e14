"""The session screen's hosted workspace in headless Chromium against a real ``skyloop dev`` (see conftest).

The ``workbench`` example agent's tools are hosted: its calls run in the session's sandboxed
workspace on the stack (bubblewrap), answered by the offline scripted model, with nobody
answering anything by hand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.browser.conftest import axe, screenshot, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from tests.browser.conftest import Stack

pytestmark = pytest.mark.e2e


def record_tool_outputs(page: Page) -> None:
    """Remember every output the newest tool row shows while it is busy (to see a command stream)."""
    page.evaluate(
        """() => {
          window.__outputs = [];
          new MutationObserver(() => {
            const rows = document.querySelectorAll('[data-kind=tool]');
            const last = rows[rows.length - 1];
            const out = last && last.querySelector('[data-testid=tool-output]');
            if (out) window.__outputs.push([out.textContent, last.getAttribute('aria-busy'), last.dataset.runsOn]);
          }).observe(document.body, {subtree: true, childList: true, characterData: true});
        }"""
    )


def send(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send", exact=True).click()


def test_workbench_session_shows_its_workspace_and_a_commands_live_output(page: Page, stack: Stack) -> None:
    sign_in(page, stack)
    page.get_by_label("Agent for a new session").select_option(label="workbench")
    page.get_by_role("button", name="New session").click()
    page.get_by_test_id("connection").filter(has_text="Live").wait_for()
    session_id = page.url.rsplit("/", 1)[1]
    workspace = page.get_by_role("region", name="Workspace")
    workspace.get_by_text("The workspace is empty.").wait_for()

    # the coding client tool set stays selected (the console's default): the agent's own hosted
    # tools still run on the server, and nothing waits for anyone
    send(page, "write notes.txt: hello from the console")
    answers = page.locator("[data-kind=assistant]")
    answers.filter(has_text="Write ran in the session's sandboxed workspace").wait_for()
    page.locator("[data-kind=usage]").first.wait_for()  # the turn has ended
    # the first hosted call made the workspace: its lifecycle (session.environment) reached the panel
    workspace.get_by_test_id("environment-status").filter(has_text="Workspace ready.").wait_for()
    write = page.locator("[data-kind=tool]").filter(has_text="Write")
    assert write.get_attribute("data-runs-on") == "server"
    assert write.get_by_test_id("tool-details").inner_text() == "/workspace/notes.txt"
    assert page.get_by_role("heading", name="Waiting on you").count() == 0
    assert page.get_by_test_id("client-call").count() == 0

    # the panel listed the workspace again when the turn ended
    view = workspace.get_by_role("button", name="View notes.txt")
    view.wait_for()
    assert "22 bytes" in workspace.get_by_role("list", name="Workspace files").inner_text()
    view.click()
    content = workspace.get_by_role("region", name="Contents of notes.txt")
    content.wait_for()
    assert content.inner_text() == "hello from the console"
    with page.expect_download() as download:
        workspace.get_by_role("button", name="Download notes.txt").click()
    assert download.value.suggested_filename == "notes.txt"
    assert download.value.path().read_text() == "hello from the console"

    # a command's output shows while it runs, then its whole output with the exit code and time
    record_tool_outputs(page)
    send(page, "run for i in 1 2 3; do echo tick $i; sleep 0.4; done; cat notes.txt")
    bash = page.locator("[data-kind=tool]").filter(has_text="tick 1")
    bash.get_by_test_id("tool-details").wait_for()
    answers.filter(has_text="Bash ran in the session's sandboxed workspace").wait_for()
    details = bash.get_by_test_id("tool-details").inner_text()
    assert details.startswith("exit 0 · "), details
    assert bash.get_by_test_id("tool-output").inner_text() == "tick 1\ntick 2\ntick 3\nhello from the console"
    assert bash.get_attribute("aria-busy") == "false"
    seen = page.evaluate("() => window.__outputs")
    live = [text for text, busy, where in seen if busy == "true" and where == "server"]
    assert any(text.startswith("tick 1") and "tick 3" not in text for text in live), seen[:10]
    assert page.get_by_test_id("client-call").count() == 0

    # what the page shows is what the API holds
    with stack.client() as c:
        listing = c.get(f"/v1/sessions/{session_id}/workspace").json()
    assert [(e["path"], e["bytes"]) for e in listing["data"]] == [("/workspace/notes.txt", 22)]

    # a file the next command writes is listed once the turn ends (and on Refresh); binary is said so
    send(page, r"run mkdir -p out && printf '\000\001\002' > out/data.bin")
    made = page.locator("[data-kind=tool]").filter(has_text="data.bin")
    made.get_by_test_id("tool-details").filter(has_text="exit 0").wait_for()
    stack.wait_status(session_id, "idle")
    workspace.get_by_role("button", name="Refresh the workspace").click()
    workspace.get_by_role("button", name="View out/data.bin").click()
    workspace.get_by_text("Binary file (3 bytes)").wait_for()
    assert workspace.get_by_role("region", name="Contents of out/data.bin").count() == 0

    page.evaluate("() => { document.querySelector('.session-side').scrollTop = 0; }")
    screenshot(page, "session-workspace")
    assert axe(page) == []
