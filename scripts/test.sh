#!/usr/bin/env bash
# `make test`: the whole default suite on the real PostgreSQL, Redis and Chromium.
# Usage: scripts/test.sh [pytest args...]   (MARKERS="slow" etc. select other suites)
source "$(dirname "$0")/lib.sh"
ensure_venv
# The platform's own PostgreSQL and Redis (var/), as `make up` has them: the tests connect as the app's
# role (it may create the test databases) and use Redis database 15 as the `web` user.
ensure_services
if [[ -z "${TEST_REDIS_URL:-}" && -s "$SECRETS/redis.port" && "$REDIS_URL" == "$(redis_url web 0)" ]]; then
  export TEST_REDIS_URL=$(redis_url web 15)
fi
cd "$ROOT"
export DJANGO_SETTINGS_MODULE=webapp.settings.test
umask "$PLATFORM_UMASK"  # the tests run as the platform's processes do (scripts/lib.sh)
"$PY" -m pytest "$@"
