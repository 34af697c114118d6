#!/bin/sh
# docker compose, the postgres container's first start: the app's role `flywheel` (no superuser, no
# CREATEDB, no CREATEROLE) owning its database; its password from FLYWHEEL_DB_PASSWORD.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v app_password="$FLYWHEEL_DB_PASSWORD" <<'EOSQL'
CREATE ROLE flywheel LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD :'app_password';
CREATE DATABASE flywheel OWNER flywheel;
EOSQL
