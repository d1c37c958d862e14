#!/bin/bash
# Lambda Web Adapter entry point: serve the SSE app; the adapter relays it in RESPONSE_STREAM mode.
PATH=$PATH:$LAMBDA_TASK_ROOT/bin PYTHONPATH=$LAMBDA_TASK_ROOT:/opt/python exec python -m uvicorn \
  --host 127.0.0.1 --port="${AWS_LWA_PORT:-8080}" --log-level warning skyloop.stream:app
