#!/bin/sh
# docker compose, the postgres container's first start: the app's role `flywheel` (no superuser, no
# CREATEDB, no CREATEROLE) owning its database; its password from the file FLYWHEEL_DB_PASSWORD_FILE
# names (the `pg_app` secret), else FLYWHEEL_DB_PASSWORD.
set -eu
if [ -n "${FLYWHEEL_DB_PASSWORD_FILE:-}" ]; then FLYWHEEL_DB_PASSWORD=$(cat "$FLYWHEEL_DB_PASSWORD_FILE"); fi
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v app_password="${FLYWHEEL_DB_PASSWORD:?}" <<'EOSQL'
CREATE ROLE flywheel LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD :'app_password';
CREATE DATABASE flywheel OWNER flywheel;
EOSQL
