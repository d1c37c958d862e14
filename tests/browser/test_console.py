"""The web console in headless Chromium against real ``skyloop dev`` stacks (see conftest).

Each test drives the console as a person would (roles and labels, the keyboard where it
matters) and checks what the page shows against what the API holds.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import axe, offer_echo, post_message, screenshot, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

    from tests.browser.conftest import Stack
    from tests.oidc_issuer import TestIssuer

pytestmark = pytest.mark.e2e

LONG_TEXT = " ".join(f"word{i}" for i in range(80))  # the mock streams it word by word, 10 ms apart


def uid() -> str:
    return uuid.uuid4().hex[:8]


def open_session(page: Page, stack: Stack, session_id: str) -> None:
    page.goto(f"{stack.url}/sessions/{session_id}")
    page.get_by_test_id("connection").filter(has_text="Live").wait_for()


def record_assistant_texts(page: Page) -> None:
    """Remember every text the newest assistant row shows, as it changes (to see streaming)."""
    page.evaluate(
        """() => {
          window.__texts = [];
          new MutationObserver(() => {
            const rows = document.querySelectorAll('[data-kind=assistant] .text');
            const last = rows[rows.length - 1];
            if (last) window.__texts.push([last.textContent, last.closest('[aria-busy]')?.getAttribute('aria-busy')]);
          }).observe(document.body, {subtree: true, childList: true, characterData: true});
        }"""
    )


def test_sign_in_with_a_token_kept_for_the_tab_only(page: Page, stack: Stack) -> None:
    page.goto(stack.url + "/sessions")
    page.get_by_label("Bearer token").fill("sky_not-a-token")
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.get_by_role("alert").filter(has_text="Signed out").wait_for()
    page.get_by_label("Bearer token").fill(stack.tokens["write"])
    page.get_by_label("Bearer token").press("Enter")  # the form submits from the keyboard
    page.get_by_role("heading", name="Sessions").wait_for()
    assert page.evaluate("() => sessionStorage.getItem('skyloop.token')") == stack.tokens["write"]
    assert page.evaluate("() => localStorage.length") == 0
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Bearer token").wait_for()
    assert page.evaluate("() => sessionStorage.getItem('skyloop.token')") is None


def test_oidc_sign_in_with_pkce_against_the_issuer(page: Page, stack: Stack, issuer: TestIssuer) -> None:
    issuer.user = "local"  # the stack's sessions belong to `local`
    before = issuer.token_requests
    page.goto(stack.url + "/agents")
    host = issuer.issuer.split("//", 1)[1]
    page.get_by_role("button", name=f"Sign in with {host}").click()
    page.get_by_role("heading", name="Agents").wait_for()  # back where the sign-in started
    assert issuer.token_requests == before + 1
    token = page.evaluate("() => sessionStorage.getItem('skyloop.token')")
    assert token
    assert token.count(".") == 2, token  # a JWT the API accepted (the page loaded)
    assert page.url == stack.url + "/agents"


def test_the_open_local_stack_opens_directly(page: Page, open_stack: Stack) -> None:
    page.goto(open_stack.url + "/")
    page.get_by_role("heading", name="Sessions").wait_for()
    assert page.get_by_label("Bearer token").count() == 0
    page.get_by_role("link", name="example session").wait_for()


def test_read_only_token_sees_read_only_controls(page: Page, stack: Stack) -> None:
    sid = stack.session(stack.agent(f"ro-{uid()}", f"mock-ro-{uid()}"), "watch only")
    sign_in(page, stack, stack.tokens["read"])
    page.get_by_text("Read-only", exact=True).wait_for()
    assert page.get_by_role("button", name="New session").count() == 0
    open_session(page, stack, sid)
    page.get_by_text("This token is read-only").wait_for()
    for name in ("Send", "Fork", "Interrupt"):
        assert page.get_by_role("button", name=name, exact=True).count() == 0, name
    assert page.get_by_label("Message").count() == 0
    assert page.get_by_label("Upload a file").count() == 0


def test_start_a_session_of_the_example_agent_and_watch_text_stream(page: Page, stack: Stack) -> None:
    sign_in(page, stack)
    page.get_by_label("Agent for a new session").select_option(label="coder")
    page.get_by_role("button", name="New session").click()
    page.get_by_test_id("connection").filter(has_text="Live").wait_for()
    session_id = page.url.rsplit("/", 1)[1]
    record_assistant_texts(page)
    message = page.get_by_label("Message")
    message.fill("Hello")
    message.press("Control+Enter")  # sends from the keyboard
    page.get_by_text("It is not a real model").wait_for()
    page.locator("[data-kind=usage]").wait_for()
    texts = page.evaluate("() => window.__texts")
    final = stack.snapshot(session_id)["items"][-1]["data"]["content"][0]["text"]
    partial = {t for t, busy in texts if busy == "true" and t and t != final}
    assert partial, f"the reply never showed part-way: {texts[:5]}"
    assert all(final.startswith(t) for t in partial), "a partial text is not a prefix of the reply"
    assert page.locator("[data-kind=user]").filter(has_text="Hello").count() == 1
    assert page.get_by_test_id("session-status").inner_text() == "idle"


def test_answer_a_parked_client_call_by_typing_its_output(page: Page, stack: Stack) -> None:
    sign_in(page, stack)
    page.get_by_label("Agent for a new session").select_option(label="coder")
    page.get_by_role("button", name="New session").click()
    page.get_by_test_id("connection").filter(has_text="Live").wait_for()
    session_id = page.url.rsplit("/", 1)[1]
    page.get_by_label("Client tools").select_option("coding")
    page.get_by_label("Message").fill("read calculator.py")
    page.get_by_role("button", name="Send", exact=True).click()
    output = page.get_by_label("Output of Read")
    output.wait_for()
    assert stack.snapshot(session_id)["pending_client_calls"] == 1
    output.fill("def divide(a, b):\n    return a / b  # typed in the console")
    page.get_by_role("button", name="Send output").click()
    page.locator("[data-kind=assistant]").filter(has_text="typed in the console").wait_for()
    page.locator("[data-kind=tool]").filter(has_text="done").wait_for()
    assert page.get_by_label("Output of Read").count() == 0
    items = stack.wait_status(session_id, "idle")["items"]
    outputs = [i["data"]["output"] for i in items if i["type"] == "function_call_output"]
    assert outputs == ["def divide(a, b):\n    return a / b  # typed in the console"]


def test_approve_a_server_tool_from_the_keyboard(page: Page, stack: Stack) -> None:
    model = f"mock-approve-{uid()}"
    tool = {
        "type": "lambda",
        "function": "smoke_echo",
        "description": "Echo",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "approval": "required",
    }
    agent_id = stack.agent(f"approver-{uid()}", model, tools={"smoke_echo": tool})
    sid = stack.session(agent_id, "approve me")
    call = {"call_id": f"call_{uid()}", "name": "smoke_echo", "arguments": {"text": "from the console"}}
    stack.mock(model, [{"tool_calls": [call]}, {"text": "The tool ran."}])
    sign_in(page, stack)
    open_session(page, stack, sid)
    page.get_by_label("Message").fill("echo something")
    page.get_by_role("button", name="Send", exact=True).click()
    approve = page.get_by_role("button", name="Approve smoke_echo")
    approve.wait_for()
    approve.focus()
    page.keyboard.press("Enter")
    page.locator("[data-kind=tool]").filter(has_text="smoke_echo: from the console").wait_for()
    page.locator("[data-kind=assistant]").filter(has_text="The tool ran.").wait_for()
    assert page.get_by_role("button", name="Approve smoke_echo").count() == 0


def test_interrupt_a_running_turn(page: Page, stack: Stack) -> None:
    model = f"mock-block-{uid()}"
    sid = stack.session(stack.agent(f"slow-{uid()}", model), "interrupt me")
    stack.mock(model, [{"block": True, "text": "never shown"}])
    sign_in(page, stack)
    open_session(page, stack, sid)
    page.get_by_label("Message").fill("take your time")
    page.get_by_role("button", name="Send", exact=True).click()
    page.get_by_test_id("session-status").filter(has_text="running").wait_for()
    try:
        page.get_by_role("button", name="Interrupt").click()
        page.locator("[data-kind=notice]").filter(has_text="Turn interrupted").wait_for()
        page.get_by_test_id("session-status").filter(has_text="idle").wait_for()
        assert page.get_by_role("button", name="Interrupt").count() == 0
        assert stack.snapshot(sid)["status"] == "idle"
    finally:
        stack.release_gate()


def test_stream_resumes_after_a_cut_without_a_duplicate_or_a_gap(page: Page, stack: Stack) -> None:
    assert stack.proxy is not None
    model = f"mock-cut-{uid()}"
    sid = stack.session(stack.agent(f"cut-{uid()}", model), "cut me")
    stack.mock(model, [{"text": "first answer"}, {"text": LONG_TEXT, "stream": True}])
    sign_in(page, stack)
    open_session(page, stack, sid)
    page.get_by_label("Message").fill("one")
    page.get_by_role("button", name="Send", exact=True).click()
    page.locator("[data-kind=assistant]").filter(has_text="first answer").wait_for()

    # the network drops; while it is down another client posts, and the whole turn runs
    assert stack.proxy.cut(hold=True) > 0
    page.get_by_test_id("connection").filter(has_text="Reconnecting").wait_for()
    post_message(stack, sid, "two")
    stack.wait_status(sid, "idle", timeout_s=30)
    time.sleep(0.3)
    stack.proxy.resume()

    page.get_by_test_id("connection").filter(has_text="reconnected").wait_for()
    page.locator("[data-kind=assistant]").filter(has_text="word79").wait_for()
    # every stored event after the opening cursor was applied exactly once: none twice, none missed
    last = stack.snapshot(sid)["last_event_id"]
    status = page.get_by_test_id("connection")
    expect(status).to_have_attribute("data-last-id", str(last))
    start = int(status.get_attribute("data-from") or "")
    assert status.get_attribute("data-events") == str(last - start)
    rows = page.locator(".rows > li")
    keys = rows.evaluate_all("els => els.map(e => e.dataset.key)")
    assert len(keys) == len(set(keys)), keys
    assert page.locator("[data-kind=user]").filter(has_text="one").count() == 1
    assert page.locator("[data-kind=user]").filter(has_text="two").count() == 1
    assert page.locator("[data-kind=assistant]").filter(has_text="first answer").count() == 1
    assert page.locator("[data-kind=assistant]").filter(has_text="word0 word1").count() == 1
    assert page.locator("[data-kind=usage]").count() == 2
    shown = page.locator("[data-kind=assistant] .text").all_inner_texts()
    assert shown == ["first answer", LONG_TEXT]


def test_inbox_badge_and_inbox_list_the_sessions_that_need_someone(page: Page, stack: Stack) -> None:
    model = f"mock-park-{uid()}"
    title = f"parked {uid()}"
    sid = stack.session(stack.agent(f"parker-{uid()}", model), title)
    call_id = f"call_{uid()}"
    stack.mock(
        model,
        [{"tool_calls": [{"call_id": call_id, "name": "Echo", "arguments": {"text": "x"}}]}, {"text": "ok"}],
    )
    sign_in(page, stack)
    badge = page.get_by_test_id("inbox-badge")
    before = int(badge.inner_text()) if badge.count() else 0
    post_message(stack, sid, "park please", tools=[offer_echo()])
    page.get_by_test_id("inbox-badge").filter(has_text=str(before + 1)).wait_for(timeout=20_000)
    page.get_by_role("link", name="Inbox").click()
    row = page.get_by_role("row").filter(has_text=title)
    row.wait_for()
    assert row.get_by_test_id("needs-you").inner_text() == "needs you (1)"
    row.get_by_role("link", name=title).click()
    page.get_by_label("Output of Echo").fill("answered")
    page.get_by_role("button", name="Send output").click()
    page.locator("[data-kind=assistant]").filter(has_text="ok").wait_for()
    page.get_by_role("link", name="Inbox").click()
    page.get_by_role("heading", name="Inbox").wait_for()
    page.get_by_role("row").filter(has_text=title).wait_for(state="detached", timeout=20_000)
    if before == 0:
        page.get_by_test_id("inbox-badge").wait_for(state="detached", timeout=20_000)


def shown_titles(links: Locator, expected: set[str], timeout_s: float = 15) -> set[str]:
    """The link texts once they are ``expected`` (the page may still show an earlier listing)."""
    deadline = time.monotonic() + timeout_s
    while True:
        shown = set(links.all_inner_texts())
        if shown == expected or time.monotonic() > deadline:
            return shown
        time.sleep(0.1)


def test_sessions_filters_search_and_paging(page: Page, stack: Stack) -> None:
    tag = uid()
    agent_id = stack.agent(f"filter-{tag}", f"mock-f-{tag}")
    ids = [stack.session(agent_id, f"filtered {tag} {n}") for n in range(22)]
    with stack.client() as c:
        c.patch(f"/v1/sessions/{ids[3]}", json={"labels": {"team": tag}}).raise_for_status()
    # The pages the API gives for this filter (the unfiltered first screen shows 20 of the same titles,
    # so a count alone cannot tell whether the filtered page has arrived)
    with stack.client() as c:
        query = {"search_query": f"filtered {tag}", "limit": 20}
        page_one = c.get("/v1/sessions", params=query).json()
        page_two = c.get("/v1/sessions", params={**query, "after": page_one["last_id"]}).json()
    sign_in(page, stack)
    page.get_by_label("Title contains").fill(f"filtered {tag}")
    page.get_by_role("button", name="Apply filters").click()
    links = page.get_by_role("link", name=f"filtered {tag}")
    first = shown_titles(links, {row["title"] for row in page_one["data"]})
    page.get_by_role("button", name="Next page").click()
    expect(links).to_have_count(2)
    second = shown_titles(links, {row["title"] for row in page_two["data"]})
    assert first | second == {f"filtered {tag} {n}" for n in range(22)}
    assert not first & second
    page.get_by_role("button", name="Previous page").click()
    expect(links).to_have_count(20)
    page.get_by_label("Label (key=value)").fill(f"team={tag}")
    page.get_by_role("button", name="Apply filters").click()
    expect(links).to_have_count(1)
    page.get_by_role("link", name=f"filtered {tag} 3", exact=True).wait_for()
    page.get_by_label("Status").select_option("running")
    page.get_by_role("button", name="Apply filters").click()
    expect(links).to_have_count(0)


def test_agents_register_from_yaml_view_and_delete(page: Page, stack: Stack, tmp_path) -> None:
    name = f"yaml-agent-{uid()}"
    spec = tmp_path / "agent.yaml"
    spec.write_text(
        f"name: {name}\nprompt: Be brief.\nexecutor:\n  harness: openai-agents\n  model: gpt-4.1-mini\n"
        "  auth: {type: api_key, api_key: sk-secret-never-shown}\n"
    )
    sign_in(page, stack)
    page.get_by_role("link", name="Agents", exact=True).click()
    page.get_by_label("Register an agent from a YAML or JSON file").set_input_files(str(spec))
    page.get_by_role("status").filter(has_text=f"Registered {name}").wait_for()
    page.get_by_role("link", name=name, exact=True).click()
    page.get_by_role("heading", name=name, exact=True).wait_for()
    shown = page.get_by_label("Agent spec").inner_text()
    assert "Be brief." in shown
    assert "gpt-4.1-mini" in shown
    assert "sk-secret-never-shown" not in shown
    page.get_by_role("button", name="Delete agent").click()
    page.get_by_role("heading", name="Agents", exact=True).wait_for()
    page.get_by_role("link", name="coder", exact=True).wait_for()  # the list has loaded
    assert page.get_by_role("link", name=name, exact=True).count() == 0
    # and a JSON spec registers as it is
    json_name = f"json-agent-{uid()}"
    spec_json = tmp_path / "agent.json"
    executor = {"harness": "openai-agents", "model": "gpt-4.1"}
    spec_json.write_text(json.dumps({"name": json_name, "prompt": "From JSON.", "executor": executor}))
    page.get_by_label("Register an agent from a YAML or JSON file").set_input_files(str(spec_json))
    page.get_by_role("status").filter(has_text=f"Registered {json_name}").wait_for()
    page.get_by_role("link", name=json_name, exact=True).wait_for()


def test_fork_export_and_files(page: Page, stack: Stack, tmp_path) -> None:
    model = f"mock-fork-{uid()}"
    sid = stack.session(stack.agent(f"forker-{uid()}", model), "fork source")
    stack.mock(model, [{"text": "forkable answer"}])
    post_message(stack, sid, "hello fork")
    stack.wait_status(sid, "idle")
    sign_in(page, stack)
    open_session(page, stack, sid)
    upload = tmp_path / "notes.txt"
    upload.write_text("file body")
    page.get_by_label("Upload a file").set_input_files(str(upload))
    page.get_by_role("button", name="Download notes.txt").wait_for()
    with page.expect_download() as download:
        page.get_by_role("button", name="Download notes.txt").click()
    assert download.value.path().read_text() == "file body"
    with page.expect_download() as exported:
        page.get_by_role("button", name="Export").click()
    lines = exported.value.path().read_text().splitlines()
    assert len(lines) == 2
    assert "hello fork" in lines[0]
    assert "forkable answer" in lines[1]
    page.get_by_role("button", name="Delete notes.txt").click()
    page.get_by_text("No files.").wait_for()
    page.get_by_role("button", name="Fork").click()
    page.get_by_role("heading", name="Fork of fork source").wait_for()
    assert page.url.rsplit("/", 1)[1] != sid
    page.locator("[data-kind=assistant]").filter(has_text="forkable answer").wait_for()


def scheduled_tasks(stack: Stack) -> list[tuple[str, str]]:
    """Three tasks of the example agent (one run now and succeeded, one paused): (id, name) each."""
    tag = uid()
    specs = [
        ("Morning alerts summary", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0", "Europe/Berlin"),
        ("Monthly cost report", "FREQ=MONTHLY;BYDAY=1MO;BYHOUR=8", "America/New_York"),
        ("Twice a year cleanup", "FREQ=YEARLY;BYMONTH=1,7;BYMONTHDAY=1;BYHOUR=6", "UTC"),
    ]
    made: list[tuple[str, str]] = []
    with stack.client() as c:
        agents = c.get("/v1/agents?scope=user&limit=100").json()["data"]
        coder = next(a["id"] for a in agents if a["name"] == "coder")
        for name, rule, zone in specs:
            body = {"name": f"{name} {tag}", "agent_id": coder, "prompt": "read calculator.py", "rrule": rule}
            r = c.post("/v1/scheduled-tasks", json={**body, "timezone": zone})
            assert r.status_code == 200, r.text
            made.append((r.json()["id"], body["name"]))
        c.patch(f"/v1/scheduled-tasks/{made[1][0]}", json={"state": "paused"}).raise_for_status()
        assert c.post(f"/v1/scheduled-tasks/{made[0][0]}/run").status_code == 202
        deadline = time.monotonic() + 30
        while c.get(f"/v1/scheduled-tasks/{made[0][0]}/runs").json()["runs"][0]["status"] != "succeeded":
            assert time.monotonic() < deadline, "the run never succeeded"
            time.sleep(0.2)
    return made


def test_every_screen_has_no_serious_accessibility_violation(page: Page, stack: Stack) -> None:
    model = f"mock-a11y-{uid()}"
    tool = {"type": "lambda", "function": "smoke_echo", "description": "Echo", "approval": "required"}
    agent_id = stack.agent(f"a11y-{uid()}", model, tools={"smoke_echo": tool})
    sid = stack.session(agent_id, "accessibility check")
    call = {"call_id": f"call_{uid()}", "name": "smoke_echo", "arguments": {"text": "hi"}}
    client_call = {"call_id": f"call_{uid()}", "name": "Echo", "arguments": {"text": "hi"}}
    stack.mock(model, [{"text": "A first answer."}, {"tool_calls": [call, client_call]}, {"text": "done"}])
    post_message(stack, sid, "first")
    stack.wait_status(sid, "idle")
    post_message(stack, sid, "call both", tools=[offer_echo()])

    found: dict[str, list[object]] = {}
    page.goto(stack.url + "/")
    page.get_by_label("Bearer token").wait_for()
    found["sign-in"] = axe(page)
    screenshot(page, "sign-in")
    sign_in(page, stack)
    page.get_by_role("link", name="accessibility check").wait_for()
    found["sessions"] = axe(page)
    screenshot(page, "sessions")
    page.get_by_role("link", name="Inbox").click()
    page.get_by_role("link", name="accessibility check").wait_for()
    found["inbox"] = axe(page)
    screenshot(page, "inbox")
    open_session(page, stack, sid)
    page.get_by_role("button", name="Approve smoke_echo").wait_for()
    page.get_by_label("Output of Echo").wait_for()
    page.get_by_text("Per-turn figures").click()
    found["session"] = axe(page)
    page.evaluate("() => { document.querySelector('.session-side').scrollTop = 0; }")
    screenshot(page, "session")
    page.get_by_role("link", name="Agents").click()
    page.get_by_role("link", name="coder").wait_for()
    found["agents"] = axe(page)
    screenshot(page, "agents")
    page.get_by_role("link", name="coder").click()
    page.get_by_label("Agent spec").wait_for()
    found["agent"] = axe(page)
    screenshot(page, "agent")
    page.get_by_role("link", name="Webhooks", exact=True).click()
    hook = "http://127.0.0.1:9/a11y-hook"  # loopback, nothing listens: never leaves the machine
    page.get_by_label("Endpoint URL").fill(hook)
    page.get_by_role("button", name="Add webhook").click()
    page.get_by_role("button", name=f"Deliveries to {hook}").click()
    found["webhooks"] = axe(page)
    screenshot(page, "webhooks")
    page.get_by_role("button", name=f"Delete webhook {hook}").click()
    page.get_by_role("row").filter(has_text=hook).wait_for(state="detached")
    tasks = scheduled_tasks(stack)
    page.get_by_role("link", name="Schedules", exact=True).click()
    page.get_by_role("button", name=f"Runs of {tasks[0][1]}").click()
    history = page.get_by_role("table", name=f"Runs of {tasks[0][1]}")
    history.get_by_role("cell", name="succeeded").first.wait_for()
    found["schedules"] = axe(page)
    screenshot(page, "schedules")
    page.get_by_role("button", name=f"Delete {tasks[0][1]}").click()
    page.get_by_role("alertdialog").wait_for()
    found["schedules (delete)"] = axe(page)
    with stack.client() as c:
        for task_id, _ in tasks:
            c.delete(f"/v1/scheduled-tasks/{task_id}").raise_for_status()
    stack.release_gate()
    assert {screen: v for screen, v in found.items() if v} == {}


def test_earlier_turns_load_above_the_newest(page: Page, stack: Stack) -> None:
    with stack.client() as c:
        agent_id = stack.agent(f"history-{uid()}", f"mock-h-{uid()}")
        items = [
            {
                "type": "message",
                "data": {"role": "user", "content": [{"type": "input_text", "text": f"line {i}"}]},
            }
            for i in range(130)
        ]
        created = c.post(
            "/v1/sessions", json={"agent_id": agent_id, "initial_items": items, "host_type": "external"}
        )
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
    sign_in(page, stack)
    open_session(page, stack, sid)
    page.locator("[data-kind=user]").filter(has_text="line 129").wait_for()
    assert page.locator("[data-kind=user]").filter(has_text="line 0").count() == 0
    page.get_by_role("button", name="Load earlier turns").click()
    # The button is gone once every earlier item is in (while loading it is "Loading earlier turns…",
    # which the name above does not match: waiting for that name to go proved nothing)
    page.locator("button.older").wait_for(state="detached")
    # The list is virtual: the oldest line is rendered once the view is at the top, and the prepend
    # may have anchored the scroll below it; scroll until it is there
    conversation = page.get_by_role("region", name="Conversation")
    oldest = page.locator("[data-kind=user]").filter(has_text="line 0")
    for _ in range(100):
        conversation.evaluate("el => { el.scrollTop = 0; }")
        if oldest.count():
            break
        page.wait_for_timeout(100)
    oldest.first.wait_for()
    assert oldest.count() == 1


def test_webhooks_add_test_list_deliveries_and_delete(page: Page, stack: Stack) -> None:
    # a receiver that answers 204 to whatever the stack delivers (a real HTTP server on loopback)
    import http.server
    import threading

    received: list[bytes] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook-{uid()}"
    try:
        sign_in(page, stack)
        page.get_by_role("link", name="Webhooks", exact=True).click()
        page.get_by_label("Endpoint URL").fill(url)
        page.get_by_label("Description").fill("console test")
        page.get_by_role("button", name="Add webhook").click()
        assert page.get_by_test_id("webhook-secret").inner_text().startswith("whsec_")
        row = page.get_by_role("row").filter(has_text=url)
        row.wait_for()
        page.get_by_role("button", name=f"Send a test event to {url}").click()
        page.get_by_role("status").filter(has_text=f"Test event sent to {url}").wait_for()
        deadline = time.monotonic() + 20
        while not received and time.monotonic() < deadline:
            time.sleep(0.1)
        assert received, "the test event never reached the receiver"
        page.get_by_role("button", name=f"Deliveries to {url}").click()
        row.get_by_role("cell").filter(has_text="succeeded").first.wait_for()
        page.get_by_role("button", name=f"Delete webhook {url}").click()
        page.get_by_role("row").filter(has_text=url).wait_for(state="detached")
    finally:
        server.shutdown()
