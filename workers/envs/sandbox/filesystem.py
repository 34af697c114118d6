"""What a sandbox's processes see of the file system: bwrap's arguments for the box's root (read-only
/usr, a short list of the host's /etc, the box's own /etc files, private /proc, /dev, /tmp), the
session's home in it, and the home's ownership (the box user's while the box lives)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from workers.envs.sandbox import egress
from workers.envs.sandbox.run import SANDBOX_HOME

INSIDE_UID = 1000
# What of the host's /etc a session sees: libraries, fonts, X and GTK defaults, MIME data, the public
# CA certificates (HTTPS for tasks with network). Never shadow/gshadow/ssh/ssl private keys, the
# machine's hostname or anything the project put there.
ETC_VISIBLE = (
    "alternatives",
    "bash.bashrc",
    "chromium",
    "chromium.d",
    "fonts",
    "gtk-2.0",
    "gtk-3.0",
    "gimp",  # OSWorld apps (make osworld-apps): their system-wide configuration, no secrets
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "libreoffice",  # share/registry is a link here: LibreOffice does not start without it
    "localtime",
    "magic",
    "mime.types",
    "nsswitch.conf",
    "ssl/certs",  # public certificates only (ssl/private stays out)
    "terminfo",
    "thunderbird",
    "vlc",
    "X11",
    "xdg",
)


def bwrap_args(
    home: Path,
    *,
    ro_binds: Mapping[str, Path],
    binds: Mapping[str, Path],
    tmp_mb: int,
    network: bool,
    fds: list[int],
) -> list[str]:
    """bwrap's arguments for a box's file system and namespaces: `home` as /home/session, `ro_binds`
    / `binds` (inside path → host path) read-only / writable, private /tmp and /dev/shm of `tmp_mb`,
    /etc/resolv.conf with `network`. Paths are handed to bwrap as open fds (appended to `fds`, which
    the caller passes to bwrap and closes), because the box user may not traverse the host
    directories above them."""
    tmp = str(tmp_mb << 20)
    args = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup-try",
        "--uid",
        str(INSIDE_UID),
        "--gid",
        str(INSIDE_UID),
        "--hostname",
        "session",
        "--new-session",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{name}"]
    for name in ETC_VISIBLE:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    # Fontconfig's system cache: without it every app of a fresh box scans all fonts (seconds).
    args += ["--ro-bind-try", "/var/cache/fontconfig", "/var/cache/fontconfig"]
    for name, text in _etc_files(network).items():
        args += ["--ro-bind-data", str(_data_fd(text, fds)), f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", tmp, "--tmpfs", "/dev/shm", "--size", tmp, "--tmpfs", "/tmp"]
    args += ["--dir", "/tmp/.X11-unix", "--dir", "/run/user/1000", "--chmod", "0700", "/run/user/1000"]
    args += ["--bind-fd", str(_path_fd(home, fds)), SANDBOX_HOME]
    args += ["--symlink", SANDBOX_HOME, "/home/user"]
    for inside, host in sorted(ro_binds.items()):
        args += ["--ro-bind-fd", str(_path_fd(host, fds)), inside]
    for inside, host in sorted(binds.items()):
        args += ["--bind-fd", str(_path_fd(host, fds)), inside]
    args += ["--chdir", SANDBOX_HOME, "--cap-drop", "ALL"]
    return args


def _etc_files(network: bool) -> dict[str, str]:
    dns = {"resolv.conf": f"nameserver {egress.RESOLVER}\n"} if network else {}
    return {
        **dns,
        "passwd": f"user:x:{INSIDE_UID}:{INSIDE_UID}:user:{SANDBOX_HOME}:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        "group": f"user:x:{INSIDE_UID}:\nnogroup:x:65534:\n",
        "hostname": "session\n",
        "shells": "/bin/sh\n/bin/bash\n/usr/bin/bash\n",
        "hosts": "127.0.0.1 localhost session\n::1 localhost\n",
    }


def _data_fd(text: str, fds: list[int]) -> int:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, text.encode())  # far below the pipe's buffer
    os.close(write_fd)
    fds.append(read_fd)
    return read_fd


def _path_fd(path: Path, fds: list[int]) -> int:
    fd = os.open(path, os.O_PATH)
    fds.append(fd)
    return fd


def untraversable_parent(home: Path) -> Path | None:
    """bwrap resolves bind sources as the box user: every directory above the home must let others
    traverse it (the default homes, made in /tmp, do). The first that does not, or None."""
    for parent in home.resolve().parents:
        if not os.stat(parent).st_mode & 0o001:
            return parent
    return None


def chown_tree(root: Path, uid: int) -> None:
    """Give the session's home (and what is in it) to the box user, or back to root on close."""
    os.lchown(root, uid, uid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            try:
                os.lchown(os.path.join(dirpath, name), uid, uid)
            except FileNotFoundError:
                pass
