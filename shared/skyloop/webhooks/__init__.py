"""Webhooks: lifecycle events posted to HTTP endpoints, signed per the Standard Webhooks spec.

* :mod:`skyloop.webhooks.models` -- endpoints, deliveries, attempts, the API's request bodies;
* :mod:`skyloop.webhooks.records` -- their rows in the table;
* :mod:`skyloop.webhooks.service` -- what the ``/v1/webhooks`` routes do (ownership, URL checks);
* :mod:`skyloop.webhooks.formats` -- what an endpoint is posted: skyloop's events, or Claude's (``anthropic``);
* :mod:`skyloop.webhooks.publisher` -- events out: EventBridge, and one delivery per endpoint
  (the cloud's ``lifecycle_events`` function, fed by the table's stream);
* :mod:`skyloop.webhooks.delivery` -- one signed attempt and what follows it (retry, dead, disable);
* :mod:`skyloop.webhooks.queue` -- the cloud's SQS FIFO delivery queue (the ``webhook_delivery`` function);
* :mod:`skyloop.webhooks.local` -- the same, inside ``skyloop dev`` (a log follower and a thread pool);
* :mod:`skyloop.webhooks.verify` -- checking a delivery as a receiver does.

The event shapes are :mod:`skyloop.lifecycle_events`' (Claude's: :mod:`skyloop.lifecycle_events.claude`).
"""
