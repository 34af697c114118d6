"""Secrets from the environment or from files (docker compose `secrets:`, mounted under /run/secrets):
`NAME_FILE` names a file holding the value of NAME, so a container gets only the secrets listed for
it and no password sits in its environment. Plain Python: the Django settings and the VNC proxy (no
Django) read their secrets through here."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit


class SecretError(RuntimeError):
    """A secret file is named but cannot be read or is empty."""


def secret_from_env(name: str, *, empty_file_ok: bool = False) -> str:
    """The file `NAME_FILE` names (stripped), else the variable NAME, else "". An empty file is an
    error (a secret that was not generated), unless `empty_file_ok`: a credential the operator may
    leave out (docker compose mounts its file in any case, empty when it is not given)."""
    path = os.environ.get(f"{name}_FILE")
    if not path:
        return os.environ.get(name, "")
    try:
        value = Path(path).read_text().strip()
    except OSError as exc:
        raise SecretError(f"{name}_FILE={path}: {exc.strerror or exc}") from exc
    if not value and not empty_file_ok:
        raise SecretError(f"{name}_FILE={path} is empty")
    return value


def url_with_password(url: str, password: str) -> str:
    """`url` with `password` as its user's password (quoted); unchanged when `password` is empty."""
    if not password:
        return url
    parts = urlsplit(url)
    user = quote(parts.username or "", safe="")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))
