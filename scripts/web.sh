#!/usr/bin/env bash
# The web server (uvicorn, ASGI) as `make up` starts it; arguments go to uvicorn (--host, --port, ...).
# --no-proxy-headers: uvicorn would believe X-Forwarded-For from 127.0.0.1, i.e. from any local client;
# Django reads it, from TRUSTED_PROXIES only (webapp/client_address.py).
# uvicorn applies backpressure to streamed responses (daphne buffers them), keeping exports flat in memory.
UVICORN="${UVICORN:-$(dirname "$0")/../.venv/bin/uvicorn}"
exec "$UVICORN" --no-proxy-headers "$@" project.asgi:application
