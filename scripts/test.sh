#!/usr/bin/env bash
# `make test`: the whole default suite on the real PostgreSQL, Redis and Chromium.
# Usage: scripts/test.sh [pytest args...]   (MARKERS="slow" etc. select other suites)
source "$(dirname "$0")/lib.sh"
ensure_venv
ensure_postgres
ensure_redis
cd "$ROOT"
export DJANGO_SETTINGS_MODULE=webapp.settings.test
"$PY" -m pytest "$@"
