#!/usr/bin/env bash
# `make up`: install what is missing, migrate, load demo data, start every process on this machine,
# print the URL and the demo logins. Idempotent: a second run only starts what is not running.
source "$(dirname "$0")/lib.sh"

HOST="${FLYWHEEL_HOST:-127.0.0.1}"
PORT="${FLYWHEEL_PORT:-8000}"
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-webapp.settings.dev}"
export PUBLIC_BASE_URL="${PUBLIC_BASE_URL:-http://$HOST:$PORT}"
export ALLOWED_HOSTS="${ALLOWED_HOSTS:-localhost,127.0.0.1,[::1],$HOST}"

ensure_debs
ensure_venv
ensure_frontend
# The platform's own PostgreSQL and Redis with generated credentials (var/secrets), SECRET_KEY, DEBUG
# off unless FLYWHEEL_DEBUG=1: exported here, and settings.dev reads the same var/secrets/env.
ensure_services
ensure_database

cd "$ROOT"
say "migrating"
"$PY" manage.py migrate --noinput >/dev/null
"$PY" manage.py collectstatic --noinput >/dev/null
say "loading demo data"
"$PY" manage.py demo_setup > "$VAR/demo_logins.txt"
"$PY" manage.py policy_init --promote --tiny-vlm >/dev/null
# The starter model (SFT on scripted-expert demonstrations, its success measured): trained once per
# machine (a few CPU minutes, cached in FLYWHEEL_CACHE_DIR, default ~/.cache/flywheel), then copied.
say "starter model (the first time: a few minutes of training)"
if ! "$PY" manage.py policy_starter > "$VAR/starter.json" 2> "$LOG_DIR/starter.log"; then
  warn "the starter model could not be trained (see $LOG_DIR/starter.log): the untrained model stays"
fi

# start NAME CMD...: run CMD in its own session with a pid file and a log; skip if already running.
start() {
  local name=$1; shift
  # Variables set on the call (NAME=value start ...) reach the process through the environment.
  local pidfile="$RUN_DIR/$name.pid"
  if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "   $name already running (pid $(cat "$pidfile"))"; return
  fi
  setsid nohup "$@" >> "$LOG_DIR/$name.log" 2>&1 < /dev/null &
  echo $! > "$pidfile"
  echo "   started $name (pid $!, log var/log/$name.log)"
}

say "starting processes"
# Each role its own Redis user: the web server `web`, the workers `worker`, the VNC proxy `vncproxy`.
REDIS_WEB_URL=$REDIS_URL
export REDIS_URL=$REDIS_WORKER_URL
CELERY=("$VENV/bin/celery" -A webapp)
REDIS_URL=$REDIS_WEB_URL UVICORN="$VENV/bin/uvicorn" start web scripts/web.sh --host "$HOST" --port "$PORT" --no-access-log
start worker-default "${CELERY[@]}" worker -n default@%h -Q default,export -c 2 -l info
start worker-env "${CELERY[@]}" worker -n env@%h -Q env -c 2 -l info
start worker-asr "${CELERY[@]}" worker -n asr@%h -Q asr -c 1 -l info
start worker-rollout "${CELERY[@]}" worker -n rollout@%h -Q rollout -c 2 -l info
start worker-train "${CELERY[@]}" worker -n train@%h -Q train -c 1 -l info
start beat "${CELERY[@]}" beat -l info --schedule "$VAR/celerybeat-schedule"
# The env host: one process owning the live environments (threads pool: every call reaches it).
FLYWHEEL_ENV_HOST=envhost1 start envhost1 "${CELERY[@]}" worker -n envhost1@%h -Q env.envhost1 -P threads -c 8 -l info
REDIS_URL=$REDIS_VNC_URL start vnc-proxy "$PY" -m workers.envs.vnc.proxy --listen "${VNC_PROXY_LISTEN:-127.0.0.1:6080}"
start policy "$PY" manage.py serve_policy --port "${POLICY_PORT:-8100}"
if [[ -x scripts/up-extra.sh ]]; then source scripts/up-extra.sh; fi

for _ in $(seq 1 60); do
  curl -fsS -o /dev/null "http://$HOST:$PORT/login/" 2>/dev/null && break; sleep 0.5
done
curl -fsS -o /dev/null "http://$HOST:$PORT/login/" || die "the web server did not answer; see var/log/web.log"

say "Flywheel is up: http://$HOST:$PORT/   (API docs: http://$HOST:$PORT/api/docs/)"
cat "$VAR/demo_logins.txt"
echo "Stop everything with: make down"
