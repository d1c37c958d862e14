"""OpenAI's Agents API (``client.beta.agents`` of the ``openai`` SDK) on skyloop, under ``/openai/v1``.

A translation layer, nothing more: every OpenAI agent is a skyloop agent,
every OpenAI session a skyloop session, every OpenAI event a view of one
stored skyloop event. The request and response shapes are read from the pinned
``openai`` package's ``types/beta/agents`` (see ``docs/openai.md``).

===========================  ============================================================================
module                       what it maps
===========================  ============================================================================
:mod:`.errors`               skyloop errors -> OpenAI's ``{"error": {message, type, param, code}}``
:mod:`.requests`             the request bodies, validated (bad input: 400, nothing written)
:mod:`.unsupported`          what skyloop does not do, each a 400 naming the feature
:mod:`.agents`               OpenAI agents <-> skyloop agent versions, the default executor
:mod:`.views`                sessions, items, turns and required actions as OpenAI objects
:mod:`.translate`            stored skyloop events -> ``agent.session.*`` events (stream and webhooks)
:mod:`.service`              the operations the routes call
:mod:`.automations`          automations as scheduled tasks (cron -> RRULE, targets, invocations = runs)
:mod:`.webhook_endpoints`    OpenAI's webhook endpoints as skyloop's webhook endpoints
===========================  ============================================================================

Imported only by the OpenAI routes and the OpenAI stream (lazily), so skyloop's
own API pays nothing for it at cold start.
"""

PREFIX = "/openai/v1"
