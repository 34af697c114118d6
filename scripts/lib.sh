# Shared helpers for scripts/*.sh: logging, root/sudo, service checks. Sourced, not run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
VAR="${FLYWHEEL_VAR_DIR:-$ROOT/var}"
RUN_DIR="$VAR/run"
LOG_DIR="$VAR/log"
mkdir -p "$RUN_DIR" "$LOG_DIR"

say() { printf '\033[1;34m==>\033[0m %s\n' "$*"; }
warn() { printf '\033[1;33m!!\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31mxx\033[0m %s\n' "$*" >&2; exit 1; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "need root (or sudo) to run: $*"; fi
}

# Debian packages the platform runs on (SPEC §11).
DEB_PACKAGES=(postgresql redis-server xvfb x11vnc openbox xterm websockify chromium espeak-ng sox
  mousepad x11-utils bubblewrap slirp4netns nftables python3-venv)

missing_debs() {
  local missing=()
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  echo "${missing[@]:-}"
}

ensure_debs() {
  local missing
  missing=$(missing_debs)
  if [[ -n "$missing" ]]; then
    say "installing Debian packages: $missing"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
}

# The venv is rebuilt only when pyproject.toml changes (a stamp holds its hash).
ensure_venv() {
  local want have=""
  want=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
  [[ -f "$VENV/.stamp" ]] && have=$(cat "$VENV/.stamp")
  if [[ "$want" == "$have" && -x "$PY" ]]; then return; fi
  say "installing Python dependencies into .venv"
  [[ -x "$PY" ]] || python3 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip
  # torch first and pinned, so nothing else pulls a newer (multi-GB) build.
  "$PY" -m pip install -q "torch==2.13.0"
  "$PY" - "$ROOT/pyproject.toml" > "$VAR/requirements.txt" <<'PYEOF'
import sys, tomllib
data = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(data["dependencies"] + data["optional-dependencies"]["dev"]))
PYEOF
  "$PY" -m pip install -q -r "$VAR/requirements.txt"
  # OSWorld's desktop-env without its (huge) dependency list; what its enabled metrics import is above.
  "$PY" - "$ROOT/pyproject.toml" > "$VAR/requirements-nodeps.txt" <<'PYEOF'
import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["tool"]["flywheel"]["no-deps"]))
PYEOF
  "$PY" -m pip install -q --no-deps -r "$VAR/requirements-nodeps.txt"
  echo "$want" > "$VENV/.stamp"
}

ensure_frontend() {
  [[ -f "$ROOT/frontend/package.json" ]] || return 0
  local want have=""
  want=$(cat "$ROOT/frontend/package-lock.json" "$ROOT/frontend/package.json" 2>/dev/null | sha256sum | cut -c1-16)
  [[ -f "$ROOT/frontend/node_modules/.stamp" ]] && have=$(cat "$ROOT/frontend/node_modules/.stamp")
  if [[ "$want" != "$have" ]]; then
    say "installing npm dependencies"
    (cd "$ROOT/frontend" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" > "$ROOT/frontend/node_modules/.stamp"
  fi
  say "building the frontend"
  (cd "$ROOT/frontend" && npm run --silent build >/dev/null)
}

pg_up() { "$PY" - <<'PYEOF' 2>/dev/null
import os, sys, psycopg
try:
    psycopg.connect(os.environ.get("PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"), connect_timeout=2).close()
except Exception:
    sys.exit(1)
PYEOF
}

ensure_postgres() {
  if [[ -n "${DATABASE_URL:-}" ]]; then return; fi
  pg_up && return
  say "starting PostgreSQL"
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then die "PostgreSQL is not installed (apt-get install postgresql)"; fi
  local ver
  ver=$(ls /etc/postgresql | sort -V | tail -1)
  as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
  # A fresh cluster only allows peer auth over the socket: allow trust on loopback for local use.
  local hba="/etc/postgresql/$ver/main/pg_hba.conf"
  if ! as_root grep -q "flywheel-local" "$hba"; then
    as_root sed -i '1i host all all 127.0.0.1/32 trust # flywheel-local\nhost all all ::1/128 trust # flywheel-local' "$hba"
    as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main reload
  fi
  for _ in $(seq 1 30); do pg_up && return; sleep 0.5; done
  die "PostgreSQL did not come up on 127.0.0.1:5432"
}

redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; }

ensure_redis() {
  if [[ -n "${REDIS_URL:-}" ]]; then return; fi
  redis_up && return
  say "starting Redis"
  command -v redis-server >/dev/null || die "Redis is not installed (apt-get install redis-server)"
  as_root mkdir -p /var/lib/redis /var/log/redis
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/flywheel.log
  for _ in $(seq 1 30); do redis_up && return; sleep 0.2; done
  die "Redis did not come up on 127.0.0.1:6379"
}

ensure_database() {
  # Create the database DATABASE_URL names (default: flywheel on the local server) if it is missing.
  "$PY" - <<'PYEOF'
import os
from urllib.parse import urlparse, urlunparse

import psycopg

url = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/flywheel"
parts = urlparse(url)
name = parts.path.lstrip("/")
admin = urlunparse(parts._replace(scheme="postgresql", path="/postgres"))
with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
    if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
        conn.execute(f'CREATE DATABASE "{name}"')
        print(f"created database {name}")
PYEOF
}
