#!/usr/bin/env bash
# `make up`: install what is missing, migrate, load demo data, start every process on this machine,
# print the URL and the demo logins. Idempotent: a second run only starts what is not running.
source "$(dirname "$0")/lib.sh"

HOST="${FLYWHEEL_HOST:-127.0.0.1}"
PORT="${FLYWHEEL_PORT:-8000}"
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-webapp.settings.dev}"
export PUBLIC_BASE_URL="${PUBLIC_BASE_URL:-http://$HOST:$PORT}"
export ALLOWED_HOSTS="${ALLOWED_HOSTS:-localhost,127.0.0.1,[::1],$HOST}"

# Worker sizes for a team of FLYWHEEL_ANNOTATORS annotators (default 8) on this machine:
#   default   candidates for every annotator step, beat upkeep, flywheel jobs: 2 + N/4 processes
#   asr.live  live think-aloud chunks, ahead of full passes: its own worker, (N + 3)/4 processes
#             (the `asr` worker runs full passes only, at a lower CPU priority: scripts/priority.sh)
#   env host  one thread per concurrent env call: annotators + rollout slots + 4
#   rollout   2 processes (the runs share them fairly: rl_control.engine.share); train 1
ANNOTATORS="${FLYWHEEL_ANNOTATORS:-8}"
[[ "$ANNOTATORS" =~ ^[0-9]+$ && "$ANNOTATORS" -ge 1 ]] || die "FLYWHEEL_ANNOTATORS must be a whole number ≥ 1"
ROLLOUT_C="${FLYWHEEL_ROLLOUT_CONCURRENCY:-2}"
DEFAULT_C=$(( 2 + ANNOTATORS / 4 ))
ASR_LIVE_C=$(( (ANNOTATORS + 3) / 4 ))
ENV_THREADS=$(( ANNOTATORS + ROLLOUT_C + 4 ))
# Browser environments for every annotator and rollout slot at once (the host boots up to this many).
export FLEET_CAPACITY="${FLEET_CAPACITY:-browser=$(( ANNOTATORS + ROLLOUT_C + 2 )),desktop=4,game=4,phone=4,terminal=4}"
ROLLOUT_Q="${RL_ROLLOUT_QUEUE:-rollout}"
CELERY=("$VENV/bin/celery" -A webapp)

# start NAME CLASS CMD...: run CMD in its own session at the CPU priority CLASS (scripts/priority.sh:
# interactive, normal, low, background) with a pid file and a log; skip if already running.
# FLYWHEEL_DRY_RUN=1 prints "NAME<tab>command" instead, the command as it would run (tests read it).
start() {
  local name=$1 class=$2; shift 2
  set -- "$ROOT/scripts/priority.sh" "$class" "$@"
  # Variables set on the call (NAME=value start ...) reach the process through the environment.
  if [[ -n "${FLYWHEEL_DRY_RUN:-}" ]]; then printf '%s\t%s\n' "$name" "$(printf '%q ' "$@")"; return; fi
  local pidfile="$RUN_DIR/$name.pid"
  if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "   $name already running (pid $(cat "$pidfile"))"; return
  fi
  # the log is the script's (umask 027); the process gets the platform's umask (lib.sh)
  (umask "$PLATFORM_UMASK" && exec setsid nohup "$@") >> "$LOG_DIR/$name.log" 2>&1 < /dev/null &
  echo $! > "$pidfile"
  echo "   started $name (pid $!, log var/log/$name.log)"
}

# FLYWHEEL_JOIN=1: this machine joins a running install (its DATABASE_URL and REDIS_URL given, with
# SECRET_KEY and MEDIA_ROOT on storage the install shares) with one env host and a rollout worker;
# nothing else starts here. The env host takes FLYWHEEL_ENV_HOST (default envhost-<hostname>), which
# must be unique in the install: its queue is env.<name>.
if [[ -n "${FLYWHEEL_JOIN:-}" ]]; then
  [[ -n "${DATABASE_URL:-}" && -n "${REDIS_URL:-}" ]] || die "FLYWHEEL_JOIN=1 joins an install: set its DATABASE_URL and REDIS_URL"
  NAME="${FLYWHEEL_ENV_HOST:-envhost-$(hostname -s)}"
  [[ "$NAME" =~ ^[A-Za-z0-9_-]+$ ]] || die "FLYWHEEL_ENV_HOST may hold only letters, digits, - and _"
  if [[ -z "${FLYWHEEL_DRY_RUN:-}" ]]; then
    ensure_debs
    ensure_venv
    "$PY" manage.py migrate --check >/dev/null || die "the install at DATABASE_URL is not reachable or not migrated"
  fi
  say "joining the install as $NAME"
  start "$NAME" interactive env DB_POOL_ROLE=envhost FLYWHEEL_ENV_HOST="$NAME" "${CELERY[@]}" worker -n "$NAME@%h" -Q "env.$NAME" -P threads -c "$ENV_THREADS" -l info
  start "rollout-$NAME" background env DB_POOL_ROLE=worker "${CELERY[@]}" worker -n "rollout-$NAME@%h" -Q "$ROLLOUT_Q" -c "$ROLLOUT_C" -l info
  [[ -n "${FLYWHEEL_DRY_RUN:-}" ]] || say "joined: the fleet page lists $NAME and its workers within a minute"
  exit 0
fi

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

say "starting processes"
# Each role its own Redis user: the web server `web`, the workers `worker`, the VNC proxy `vncproxy`.
REDIS_WEB_URL=$REDIS_URL
export REDIS_URL=$REDIS_WORKER_URL
# Each process's database pool is sized by its role (DB_POOL_ROLE; the budget: docs/scale.md).
REDIS_URL=$REDIS_WEB_URL UVICORN="$VENV/bin/uvicorn" start web interactive env DB_POOL_ROLE=web scripts/web.sh --host "$HOST" --port "$PORT" --no-access-log
start worker-default normal env DB_POOL_ROLE=worker "${CELERY[@]}" worker -n default@%h -Q default,export -c "$DEFAULT_C" -l info
start worker-env normal env DB_POOL_ROLE=worker "${CELERY[@]}" worker -n env@%h -Q env -c 2 -l info
start worker-asr-live interactive env DB_POOL_ROLE=worker "${CELERY[@]}" worker -n asr-live@%h -Q asr.live -c "$ASR_LIVE_C" -l info
start worker-asr low env DB_POOL_ROLE=worker "${CELERY[@]}" worker -n asr@%h -Q asr -c 1 -l info
start worker-rollout background env DB_POOL_ROLE=worker "${CELERY[@]}" worker -n rollout@%h -Q rollout -c "$ROLLOUT_C" -l info
start worker-train background env DB_POOL_ROLE=worker "${CELERY[@]}" worker -n train@%h -Q train -c 1 -l info
start beat normal env DB_POOL_ROLE=command "${CELERY[@]}" beat -l info --schedule "$VAR/celerybeat-schedule"
# The env host: one process owning the live environments (threads pool: every call reaches it).
start envhost1 interactive env DB_POOL_ROLE=envhost FLYWHEEL_ENV_HOST=envhost1 "${CELERY[@]}" worker -n envhost1@%h -Q env.envhost1 -P threads -c "$ENV_THREADS" -l info
REDIS_URL=$REDIS_VNC_URL start vnc-proxy interactive "$PY" -m workers.envs.vnc.proxy --listen "${VNC_PROXY_LISTEN:-127.0.0.1:6080}"
start policy interactive env DB_POOL_ROLE=command "$PY" manage.py serve_policy --port "${POLICY_PORT:-8100}"
if [[ -x scripts/up-extra.sh ]]; then source scripts/up-extra.sh; fi

for _ in $(seq 1 60); do
  curl -fsS -o /dev/null "http://$HOST:$PORT/login/" 2>/dev/null && break; sleep 0.5
done
curl -fsS -o /dev/null "http://$HOST:$PORT/login/" || die "the web server did not answer; see var/log/web.log"
# "up" only when a launch or a session would not be refused for a worker or environment still starting
say "waiting for the workers and environments"
"$PY" manage.py fleet_ready --timeout "${FLYWHEEL_READY_WAIT_S:-240}" \
  || warn "some workers or environments are still starting (above): the fleet page shows them; see var/log/"

say "Flywheel is up: http://$HOST:$PORT/   (API docs: http://$HOST:$PORT/api/docs/)"
cat "$VAR/demo_logins.txt"
echo "Stop everything with: make down"
