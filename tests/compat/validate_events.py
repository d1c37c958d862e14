"""Runs in the omnigent venv: validate stream events against omnigent's ``ServerStreamEvent``.

stdin: a JSON list of event payloads (each with ``type``). stdout: a JSON list,
one ``null`` (valid) or error text per event. This is the same adapter
omnigent's SDK parses the session stream with; it drops events that fail it.
"""

import json
import sys

from omnigent.server.schemas import ServerStreamEvent
from pydantic import TypeAdapter, ValidationError

adapter: TypeAdapter = TypeAdapter(ServerStreamEvent)
results = []
for event in json.load(sys.stdin):
    try:
        adapter.validate_python(event)
        results.append(None)
    except ValidationError as exc:
        results.append(str(exc))
json.dump(results, sys.stdout)
