#!/usr/bin/env bash
# `make compose-secrets`: the secrets docker-compose.yml mounts (its `secrets:`), generated once into
# var/secrets (0700, files 0600; random; the names `make up` uses for the same credentials). Run it
# before the first `docker compose up`; a second run keeps what exists. Each compose service gets
# only the files it lists, so none of these belongs in .env.
source "$(dirname "$0")/lib.sh"

for name in secret_key pg_superuser pg_app redis_web redis_worker redis_vncproxy policy_key vnc_grant_key; do
  secret "$name" > /dev/null
done
say "compose secrets in $SECRETS: $(ls "$SECRETS" | tr '\n' ' ')"
