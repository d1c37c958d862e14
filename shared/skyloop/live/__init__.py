"""The live channel: session events pushed over a WebSocket, so an idle viewer costs almost nothing.

An open SSE stream holds a Lambda function for its whole life; a WebSocket
held by API Gateway costs connection minutes and messages only, and nothing
runs while nothing happens. The skyloop SDK and the console watch sessions
here; the SSE stream stays for omnigent clients.

* :mod:`skyloop.live.protocol` -- the JSON frames both ways and the limits;
* :mod:`skyloop.live.access` -- who may watch what (the REST API's rules);
* :mod:`skyloop.live.cloud` -- the ``live`` function: ``$connect``,
  ``$disconnect`` and the client's frames, with connections and subscriptions
  in the table;
* :mod:`skyloop.live.fanout` -- the ``push_fanout`` function: each new event
  from the table's stream, posted to the session's subscribers;
* :mod:`skyloop.live.local` -- the same protocol inside ``skyloop dev``,
  woken by the in-process feed instead of a table stream.

Only ``local`` imports Starlette; the Lambda side needs boto3 and pydantic.
"""
