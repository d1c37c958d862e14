"""Every test process: the mock servers tests start live on 127.0.0.1, as on the local stack.

``skyloop dev`` allows loopback model and MCP URLs itself (``skyloop.outbound``);
tests that build the store or turn steps in-process get the same allowance
here. ``tests/unit/test_outbound.py`` checks the refusals with explicit settings.
"""

import os

os.environ.setdefault("SKYLOOP_OUTBOUND_ALLOW_LOOPBACK", "true")
