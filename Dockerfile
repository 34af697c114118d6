# One image for web, workers and beat; the command picks the role (see docker-compose.yml).
FROM node:20-bookworm-slim AS frontend
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=webapp.settings.prod
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      xvfb x11vnc openbox xterm mousepad x11-utils websockify chromium espeak-ng sox bubblewrap slirp4netns nftables curl \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml ./
COPY requirements/ ./requirements/
RUN python - <<'PY' > /tmp/requirements.txt
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))
PY
RUN pip install --no-cache-dir "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && pip install --no-cache-dir --no-deps --require-hashes -r requirements/asr-tiny.txt
COPY . .
COPY --from=frontend /src/frontend/dist /app/frontend/dist
# OSWorld task apps for the domains an admin enables (docs/osworld.md), e.g.
# docker build --build-arg OSWORLD_DOMAINS="os libreoffice vlc" .  (none by default: a lean image)
ARG OSWORLD_DOMAINS=""
RUN if [ -n "$OSWORLD_DOMAINS" ]; then DOMAINS="$OSWORLD_DOMAINS" scripts/osworld-apps.sh \
      && rm -rf /var/lib/apt/lists/*; fi
RUN SECRET_KEY=build-only-collectstatic-key-0123456789abcdef python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["uvicorn", "--host", "0.0.0.0", "--port", "8000", "--workers", "2", "--no-proxy-headers", "project.asgi:application"]
