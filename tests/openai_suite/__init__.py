"""The OpenAI Agents API suite: the real ``openai`` SDK against a skyloop endpoint.

Run against ``skyloop dev`` by ``tests/compat/test_openai_agents.py`` and
against the API handler in Lambda's shape by
``tests/integration/test_openai_agents.py``: the same scenarios, two ends.
"""
