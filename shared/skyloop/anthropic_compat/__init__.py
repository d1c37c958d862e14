"""Claude Managed Agents (``client.beta.agents|environments|sessions`` of the ``anthropic`` SDK) on skyloop.

Served under ``/anthropic/v1``, so ``Anthropic(base_url=f"{endpoint}/anthropic", api_key=<a skyloop
token>)`` works unchanged. A translation layer, nothing more: every Claude agent is a skyloop agent
(its versions skyloop's versions of one name), every session a skyloop session, every event a view of
one stored skyloop event. The shapes are read from the pinned ``anthropic`` package's ``types/beta``
(see ``docs/anthropic.md``).

===========================  ============================================================================
module                       what it maps
===========================  ============================================================================
:mod:`.errors`               skyloop errors -> Anthropic's ``{"type": "error", "error": {type, message}}``
:mod:`.requests`             the request bodies, validated (bad input: 400, nothing written)
:mod:`.toolset`              the agent toolset <-> skyloop's hosted built-ins or client tools
:mod:`.agents`               Claude agents <-> skyloop agent versions
:mod:`.environments`         environments (``cloud``: skyloop's hosted environment; ``self_hosted``)
:mod:`.work`                 a self-hosted environment's work queue (the SDK's environment worker)
:mod:`.confirm`              confirmations of a self-hosted built-in's call
:mod:`.unsupported`          what skyloop does not serve: a 400 naming the feature
:mod:`.views`                sessions, usage and budgets as Claude objects
:mod:`.translate`            stored skyloop events -> Claude session events (history and stream)
:mod:`.service`              the operations the routes call
===========================  ============================================================================

Imported only by the Anthropic routes and stream (lazily), so skyloop's own API pays nothing for it
at cold start.
"""

PREFIX = "/anthropic/v1"
BETA = "managed-agents-2026-04-01"
