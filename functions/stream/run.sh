#!/bin/bash
# Lambda Web Adapter entry point: serve the SSE app; the adapter relays it in RESPONSE_STREAM mode.
# The task root and the layer go first on PYTHONPATH; the runtime's own entries (Lambda sets
# PYTHONPATH for its Python runtimes) stay after them, and no empty entry is added when it is unset.
PATH=$PATH:$LAMBDA_TASK_ROOT/bin \
PYTHONPATH=$LAMBDA_TASK_ROOT:/opt/python${PYTHONPATH:+:$PYTHONPATH} \
  exec python -m uvicorn --host 127.0.0.1 --port="${AWS_LWA_PORT:-8080}" --log-level warning skyloop.stream:app
