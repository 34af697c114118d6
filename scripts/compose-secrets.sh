#!/usr/bin/env bash
# `make compose-secrets`: the secrets docker-compose.yml mounts (its `secrets:`), generated once into
# var/secrets (0700, files 0600; random; the names `make up` uses for the same credentials). Run it
# before the first `docker compose up`; a second run keeps what exists. Each compose service gets
# only the files it lists, so none of these belongs in .env.
source "$(dirname "$0")/lib.sh"

for name in secret_key secret_key_workers pg_superuser pg_app redis_web redis_worker redis_vncproxy \
  policy_key vnc_grant_key; do
  secret "$name" > /dev/null
done

# Credentials only the operator has: written from the variable of that name when it is given (e.g.
# `FLYWHEEL_S3_ACCESS_KEY=… FLYWHEEL_S3_SECRET_KEY=… make compose-secrets`), else kept; an empty file
# when there is none (compose mounts a file in any case; empty means "not given").
given() {
  local file="$SECRETS/$1" value="${!2:-}"
  (
    umask 077
    mkdir -p "$SECRETS" && chmod 700 "$SECRETS"
    if [[ -n "$value" ]]; then printf '%s\n' "$value" > "$file"; elif [[ ! -e "$file" ]]; then : > "$file"; fi
  )
  # .env reaches every app container: a container finding a secret there refuses to start.
  if [[ -f "$ROOT/.env" ]] && grep -qE "^$2=.+" "$ROOT/.env"; then
    warn "$2 is set in .env: move its value to $file (this command with $2=… set) and delete the line"
  fi
}
given s3_access_key FLYWHEEL_S3_ACCESS_KEY
given s3_secret_key FLYWHEEL_S3_SECRET_KEY
given refine_api_key THINKALOUD_REFINE_API_KEY
say "compose secrets in $SECRETS: $(ls "$SECRETS" | tr '\n' ' ')"
