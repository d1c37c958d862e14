"""Runs in the omnigent venv: omnigent's SDK against skyloop, printing what it saw as JSON.

argv: base_url agent_id. Creates a session with ``create_from_agent_id``, runs one
turn whose agent-declared client tool the SDK executes itself, then interrupts a
second turn and reports the typed events the SDK parsed.
"""

import asyncio
import json
import sys

from omnigent_client import OmnigentClient, SessionsChat


async def main(base_url: str, agent_id: str) -> dict:
    ran: list[dict] = []

    def read(info: object) -> str:
        path = info.arguments["file_path"]  # type: ignore[attr-defined]
        ran.append({"tool": "Read", "file_path": path})
        return f"1\tcontents of {path}"

    def note(info: object) -> str:
        return "noted"

    async with OmnigentClient(base_url=base_url) as client:
        session = await client.sessions.create_from_agent_id(
            agent_id, title="sdk", reasoning_effort="low", workspace="/tmp/sdk"
        )
        chat = SessionsChat(
            namespace=client.sessions,
            files_uploader=None,
            files_getter=None,
            session=session,
            tool_callables={"Read": read, "Note": note},
            agent_tools_getter=client._fetch_agent_tools,
        )
        first = [type(e).__name__ + ":" + e.type async for e in chat.send("read a.py please")]
        second: list[str] = []

        async def run_second() -> None:
            async for e in chat.send("this one gets interrupted"):
                second.append(e.type)

        task = asyncio.create_task(run_second())
        for _ in range(200):
            if "response.in_progress" in second:
                break
            await asyncio.sleep(0.05)
        await chat.cancel()
        await asyncio.wait_for(task, 30)
        snap = await client.sessions.get(session.id)
        return {
            "session_id": session.id,
            "reasoning_effort": snap.reasoning_effort,
            "first": first,
            "second": second,
            "ran": ran,
            "status": snap.status,
        }


print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
