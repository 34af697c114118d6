# The platform's own PostgreSQL cluster and Redis server, with credentials generated at the first
# `make up` into var/secrets (0700, files 0600). Sourced by lib.sh, not run.
#
# Nothing here trusts "it's on localhost" (docs/threat-model.md, "Other local accounts"): the cluster
# takes scram-sha-256 passwords only (no trust, no peer) and the app's role `flywheel` is no superuser;
# Redis has no usable `default` user, one ACL user per role (web, worker, vncproxy). When DATABASE_URL
# or REDIS_URL is given, that server is used as it is and nothing of ours is started for it.

SECRETS="$VAR/secrets"
REDIS_DIR="$VAR/redis"
PG_ROLE=flywheel

is_root() { [[ $(id -u) -eq 0 ]]; }

# The cluster's directory: var/pg, or (as root, when the postgres account cannot reach var/, e.g. a
# checkout under /root) one of its own under /var/lib/postgresql; FLYWHEEL_PG_DIR overrides both.
pg_dir() {
  if [[ -n "${FLYWHEEL_PG_DIR:-}" ]]; then echo "$FLYWHEEL_PG_DIR"
  elif is_root && ! runuser -u postgres -- test -x "$VAR" 2> /dev/null; then
    echo "/var/lib/postgresql/flywheel-$(realpath "$VAR" | sha256sum | cut -c1-12)"
  else echo "$VAR/pg"; fi
}

# secret NAME: var/secrets/NAME, generated (random) the first time it is asked for.
secret() {
  local file="$SECRETS/$1"
  (
    umask 077
    mkdir -p "$SECRETS" && chmod 700 "$SECRETS"
    [[ -s "$file" ]] || python3 -c 'import secrets; print(secrets.token_hex(24))' > "$file"
  )
  cat "$file"
}

port_busy() { (exec 3<> "/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# service_port NAME PREFERRED: the port recorded for NAME, else the first free one from PREFERRED on
# (recorded: a second stack with another var dir gets its own ports).
service_port() {
  local file="$SECRETS/$1.port" port=$2
  if [[ -s "$file" ]]; then cat "$file"; return; fi
  while port_busy "$port"; do port=$((port + 1)); done
  (umask 077 && mkdir -p "$SECRETS" && echo "$port" > "$file")
  echo "$port"
}

port_free_or_die() {
  if port_busy "$1"; then
    die "port $1, recorded for $2 in $SECRETS/$2.port, is taken by another process: stop it, or delete that file to pick another"
  fi
}

# PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` account.
pg_as() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }

pg_bindir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [[ -x "$dir/initdb" ]] || die "PostgreSQL is not installed (apt-get install postgresql)"
  echo "$dir"
}

pg_init() {
  local bin=$1 port=$2 data="$PG_DIR/data" pwfile="$PG_DIR/.superuser-password"
  say "creating the platform's PostgreSQL cluster in $PG_DIR (127.0.0.1:$port, passwords only)"
  mkdir -p "$PG_DIR" && chmod 700 "$PG_DIR"
  if is_root; then chown postgres: "$PG_DIR"; fi
  pg_as test -w "$PG_DIR" || die "user postgres cannot write to $PG_DIR: set FLYWHEEL_PG_DIR"
  # initdb reads the superuser's password from a file: a copy the postgres account can read, removed after.
  (umask 077 && secret pg_superuser > "$pwfile")
  if is_root; then chown postgres: "$pwfile"; fi
  pg_as "$bin/initdb" -D "$data" -U postgres --pwfile="$pwfile" --auth=scram-sha-256 -E UTF8 \
    --locale=C.UTF-8 > "$LOG_DIR/initdb.log" || die "initdb failed (see $LOG_DIR/initdb.log)"
  rm -f "$pwfile"
  pg_as mkdir -m 700 "$PG_DIR/run"
  pg_as tee "$data/pg_hba.conf" > /dev/null <<EOF
# Written by scripts/services.sh: every connection gives a password (scram-sha-256); no trust, no peer.
local all all scram-sha-256
host all all 127.0.0.1/32 scram-sha-256
EOF
  pg_as tee -a "$data/postgresql.conf" > /dev/null <<EOF

# scripts/services.sh: loopback only, the socket in a 0700 directory, sized for the platform.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$PG_DIR/run'
unix_socket_permissions = 0700
password_encryption = scram-sha-256
max_connections = ${FLYWHEEL_PG_MAX_CONNECTIONS:-200}
EOF
}

# The app's role (no superuser; CREATEDB for the test databases) and its database, the role's password
# set from var/secrets each time (a changed secret file takes effect at the next `make up`).
pg_app_role() {
  PG_PORT=$1 PG_SUPERUSER_PASSWORD=$(secret pg_superuser) PG_APP_PASSWORD=$(secret pg_app) \
    PG_ROLE=$PG_ROLE "$PY" - <<'PYEOF'
import os

import psycopg
from psycopg import sql

role, password = os.environ["PG_ROLE"], os.environ["PG_APP_PASSWORD"]
admin = psycopg.connect(
    host="127.0.0.1", port=os.environ["PG_PORT"], user="postgres", dbname="postgres",
    password=os.environ["PG_SUPERUSER_PASSWORD"], autocommit=True, connect_timeout=10,
)
with admin:
    verb = "ALTER" if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone() else "CREATE"
    admin.execute(
        sql.SQL(verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEROLE NOREPLICATION CREATEDB PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(password)
        )
    )
    if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [role]).fetchone():
        admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(role), sql.Identifier(role)))
PYEOF
}

ensure_platform_postgres() {
  if [[ -n "${DATABASE_URL:-}" ]]; then return; fi
  local bin port
  PG_DIR=$(pg_dir)
  bin=$(pg_bindir)
  port=$(service_port postgres "${FLYWHEEL_PG_PORT:-15432}")
  [[ -s "$PG_DIR/data/PG_VERSION" ]] || pg_init "$bin" "$port"
  if ! pg_as "$bin/pg_ctl" -D "$PG_DIR/data" status > /dev/null 2>&1; then
    port_free_or_die "$port" postgres
    say "starting PostgreSQL (the platform's own cluster, 127.0.0.1:$port)"
    pg_as "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/data/server.log" -w -t 60 start > /dev/null \
      || die "PostgreSQL did not start (see $PG_DIR/data/server.log)"
  fi
  pg_app_role "$port"
}

stop_platform_postgres() {
  PG_DIR=$(pg_dir)
  [[ -s "$PG_DIR/data/postmaster.pid" ]] || return 0
  pg_as "$(pg_bindir)/pg_ctl" -D "$PG_DIR/data" -m fast -w stop > /dev/null && echo "stopped postgres"
}

# redis_url USER DB: the URL of the platform's Redis for that ACL user.
redis_url() { echo "redis://$1:$(secret "redis_$1")@127.0.0.1:$(cat "$SECRETS/redis.port")/$2"; }

redis_answers() {
  [[ "$(REDISCLI_AUTH=$(secret redis_web) redis-cli --no-auth-warning --user web -p "$1" ping 2>/dev/null)" == PONG ]]
}

# The server's settings; its users are deploy/redis-acl.sh's (the same as docker compose's).
redis_conf() {
  cat <<EOF
bind 127.0.0.1
port $1
protected-mode yes
daemonize yes
pidfile $REDIS_DIR/redis.pid
logfile $REDIS_DIR/redis.log
dir $REDIS_DIR
save ""
appendonly no
EOF
  REDIS_WEB_PASSWORD=$(secret redis_web) REDIS_WORKER_PASSWORD=$(secret redis_worker) \
    REDIS_VNCPROXY_PASSWORD=$(secret redis_vncproxy) sh "$ROOT/deploy/redis-acl.sh"
}

ensure_platform_redis() {
  if [[ -n "${REDIS_URL:-}" ]]; then return; fi
  command -v redis-server > /dev/null || die "Redis is not installed (apt-get install redis-server)"
  local port
  port=$(service_port redis "${FLYWHEEL_REDIS_PORT:-16379}")
  redis_answers "$port" && return
  port_free_or_die "$port" redis
  say "starting Redis (the platform's own, 127.0.0.1:$port, one password per role)"
  mkdir -p "$REDIS_DIR" && chmod 700 "$REDIS_DIR"
  (umask 077 && redis_conf "$port" > "$REDIS_DIR/redis.conf")
  redis-server "$REDIS_DIR/redis.conf" || die "Redis did not start (see $REDIS_DIR/redis.log)"
  for _ in $(seq 1 50); do redis_answers "$port" && return; sleep 0.1; done
  die "Redis did not answer on 127.0.0.1:$port (see $REDIS_DIR/redis.log)"
}

stop_platform_redis() {
  [[ -s "$REDIS_DIR/redis.pid" ]] || return 0
  local pid
  pid=$(cat "$REDIS_DIR/redis.pid")
  if kill -0 "$pid" 2> /dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    echo "stopped redis"
  fi
  rm -f "$REDIS_DIR/redis.pid"
}

# var/secrets/env: what Django reads (settings.dev loads it when present, so `python manage.py ...`
# works after `make up`): the SECRET_KEY, the app role's DATABASE_URL, the web user's REDIS_URL and
# DEBUG (off unless FLYWHEEL_DEBUG=1). Rewritten at every `make up`, 0600.
write_services_env() {
  local debug=false
  if [[ "${FLYWHEEL_DEBUG:-0}" == 1 ]]; then debug=true; fi
  (
    umask 077
    # The redirection below opens its file before `secret` makes the directory: with DATABASE_URL
    # and REDIS_URL given, nothing else has made it on a fresh checkout.
    mkdir -p "$SECRETS" && chmod 700 "$SECRETS"
    {
      echo "SECRET_KEY=$(secret secret_key)"
      echo "DEBUG=$debug"
      if [[ -z "${DATABASE_URL:-}" ]]; then
        echo "DATABASE_URL=postgres://$PG_ROLE:$(secret pg_app)@127.0.0.1:$(cat "$SECRETS/postgres.port")/$PG_ROLE"
      fi
      if [[ -z "${REDIS_URL:-}" ]]; then echo "REDIS_URL=$(redis_url web 0)"; fi
    } > "$SECRETS/env.new"
    mv "$SECRETS/env.new" "$SECRETS/env"
  )
}

# Export what var/secrets/env sets, except what the caller's environment already sets.
load_services_env() {
  local key value
  while IFS='=' read -r key value; do
    if [[ -n "$key" && -z "${!key:-}" ]]; then export "$key=$value"; fi
  done < "$SECRETS/env"
}

# The URLs each role's processes get (up.sh): the given REDIS_URL for all when one was given.
role_redis_urls() {
  if [[ -s "$SECRETS/redis.port" && "$REDIS_URL" == "$(redis_url web 0)" ]]; then
    REDIS_WORKER_URL=$(redis_url worker 0)
    REDIS_VNC_URL=$(redis_url vncproxy 0)
  else
    REDIS_WORKER_URL=$REDIS_URL
    REDIS_VNC_URL=$REDIS_URL
  fi
}

ensure_services() {
  ensure_platform_postgres
  ensure_platform_redis
  write_services_env
  load_services_env
  role_redis_urls
}
