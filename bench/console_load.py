"""The web console's speed on the local stack: first screen, and a 5,000-item session.

Starts its own ``skyloop dev`` (no token), builds nothing (``make console`` first), and
drives Debian's Chromium with Playwright, as the browser tests do. Measured, each over
``--runs`` fresh browser contexts (no cache):

* ``first_screen_ms``: ``page.goto('/')`` until the sessions table shows a session;
* ``session_open_ms``: ``page.goto('/sessions/<id>')`` of a session holding 5,000 items
  until its newest message is on screen and the stream is live;
* ``full_history_ms``: from there until every one of the 5,000 items is loaded (scrolling
  to the top, as a reader would, page after page);
* scrolling the whole history top to bottom in viewport steps: the longest main-thread task
  (``longtask`` entries), frames over 50 ms, and how many rows the DOM holds (virtualized).

    make console && .venv/bin/python bench/console_load.py      # -> bench/results/console_load.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
ITEMS = 5000
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TARGETS = {"first_screen_ms": 1000.0, "session_open_ms": 2000.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_stack(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "skyloop", "dev", "--port", str(port)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "OPENAI_API_KEY": ""},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"skyloop dev exited:\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200 and "serving" in log.read_text():
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("skyloop dev did not start")


def seed_history(url: str) -> str:
    """A session holding 5,000 items: user and assistant messages, and client calls with outputs."""
    agent_id = httpx.get(f"{url}/v1/agents", params={"name": "coder"}).json()["data"][0]["id"]
    items: list[dict[str, Any]] = []
    n = 0
    while len(items) < ITEMS:
        text = f"Question {n}: " + "lorem ipsum dolor sit amet " * (1 + n % 7)
        items.append(
            {"type": "message", "data": {"role": "user", "content": [{"type": "input_text", "text": text}]}}
        )
        if n % 5 == 4 and len(items) + 3 <= ITEMS:
            call = f"call_{n}"
            args = json.dumps({"file_path": f"src/module_{n}.py"})
            items.append(
                {"type": "function_call", "data": {"call_id": call, "name": "Read", "arguments": args}}
            )
            out = "\n".join(f"{i}\tline {i} of module {n}" for i in range(1, 1 + n % 12))
            items.append({"type": "function_call_output", "data": {"call_id": call, "output": out}})
        answer = f"Answer {n}. " + "The quick brown fox jumps over the lazy dog. " * (1 + n % 9)
        items.append(
            {
                "type": "message",
                "data": {"role": "assistant", "content": [{"type": "output_text", "text": answer}]},
            }
        )
        n += 1
    items = items[:ITEMS]
    body = {"agent_id": agent_id, "initial_items": items, "host_type": "external"}
    resp = httpx.post(f"{url}/v1/sessions", json=body, timeout=120)
    resp.raise_for_status()
    sid = str(resp.json()["id"])
    httpx.patch(f"{url}/v1/sessions/{sid}", json={"title": "5,000 items"}).raise_for_status()
    return sid


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
        "n": len(values),
    }


OBSERVE = """() => {
  window.__long = [];
  new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__long.push(e.duration); })
    .observe({ type: 'longtask', buffered: true });
}"""

SCROLL = """async () => {
  const el = document.querySelector('.scroller');
  const frames = [];
  let last = performance.now();
  el.scrollTop = 0;
  await new Promise(r => requestAnimationFrame(r));
  const steps = Math.ceil(el.scrollHeight / el.clientHeight) + 2;
  let maxRows = 0;
  for (let i = 0; i < steps; i++) {
    el.scrollTop += el.clientHeight;
    await new Promise(r => requestAnimationFrame(r));
    const now = performance.now();
    frames.push(now - last);
    last = now;
    maxRows = Math.max(maxRows, el.querySelectorAll('.rows > li').length);
  }
  return { steps, frames, maxRows, height: el.scrollHeight };
}"""


def measure(browser: Any, url: str, sid: str) -> dict[str, Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    started = time.perf_counter()
    page.goto(f"{url}/")
    page.get_by_role("link", name="5,000 items").wait_for()
    first_screen = (time.perf_counter() - started) * 1000
    page.close()

    page = context.new_page()
    page.add_init_script(OBSERVE.join(("(", ")();")))
    started = time.perf_counter()
    page.goto(f"{url}/sessions/{sid}")
    page.locator("[data-kind=assistant]").last.wait_for()
    page.get_by_test_id("connection").filter(has_text="Live").wait_for()
    session_open = (time.perf_counter() - started) * 1000

    older = page.get_by_role("button", name=re.compile("earlier turns"))
    while older.count():
        page.evaluate("() => { document.querySelector('.scroller').scrollTop = 0; }")
        page.wait_for_function(
            "() => !document.querySelector('.older') || !document.querySelector('.older').disabled"
        )
        page.wait_for_timeout(10)
    full_history = (time.perf_counter() - started) * 1000
    page.evaluate("() => { window.__long = []; }")
    scroll = page.evaluate(SCROLL)
    long_tasks = page.evaluate("() => window.__long")
    context.close()
    return {
        "first_screen_ms": first_screen,
        "session_open_ms": session_open,
        "full_history_ms": full_history,
        "scroll_steps": scroll["steps"],
        "scroll_max_frame_ms": max(scroll["frames"]),
        "scroll_frames_over_50ms": sum(1 for f in scroll["frames"] if f > 50),
        "scroll_longest_task_ms": max(long_tasks, default=0.0),
        "dom_rows_max": scroll["maxRows"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "console_load.json")
    args = parser.parse_args()
    if not (ROOT / "console" / "dist" / "index.html").is_file():
        raise SystemExit("build the console first: make console")
    from playwright.sync_api import sync_playwright

    RESULTS.mkdir(parents=True, exist_ok=True)
    proc, url = start_stack(RESULTS / "console_load.dev.log")
    try:
        sid = seed_history(url)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            measure(browser, url, sid)  # warm-up: the stack's workers and Chromium's first start
            runs = [measure(browser, url, sid) for _ in range(args.runs)]
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "items": ITEMS,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()},
        "metrics": {key: summary([r[key] for r in runs]) for key in runs[0]},
        "targets": TARGETS,
        "runs": runs,
    }
    args.out.write_text(json.dumps(report, indent=2))
    print(f"{'metric':<28}{'median':>10}{'min':>10}{'max':>10}")
    for key, s in report["metrics"].items():
        target = f"  (target <= {TARGETS[key]:.0f})" if key in TARGETS else ""
        print(f"{key:<28}{s['median']:>10}{s['min']:>10}{s['max']:>10}{target}")
    met = all(report["metrics"][k]["median"] <= v for k, v in TARGETS.items())
    print("targets met" if met else "targets NOT met")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
