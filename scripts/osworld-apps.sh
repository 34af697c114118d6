#!/usr/bin/env bash
# `make osworld-apps DOMAINS="libreoffice gimp ..."`: install the Debian applications that OSWorld
# tasks of the given domains drive, for the desktops of this host (docs/osworld.md). `make up`
# never runs this (it stays fast); an admin runs it once for the domains they enable.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
umask "$PLATFORM_UMASK"  # installed programs and modules are read by the sessions' own uids

declare -A DOMAIN_DEBS=(
  [os]="dbus-daemon dconf-service dconf-gsettings-backend libglib2.0-bin xdotool wmctrl xclip xsel sysstat pulseaudio-utils python3-tk zsh at-spi2-core python3-pyatspi gnome-shell-common"
  [libreoffice]="libreoffice-calc libreoffice-writer libreoffice-impress libreoffice-gtk3"
  [gimp]="gimp"
  [vlc]="vlc"
  [thunderbird]="thunderbird"
  [chrome]="chromium socat jq"
)

domains="${DOMAINS:-${*:-}}"
[[ -n "$domains" ]] || die "name the domains: make osworld-apps DOMAINS=\"libreoffice gimp\" (known: ${!DOMAIN_DEBS[*]})"
debs=()
for d in $domains; do
  [[ -n "${DOMAIN_DEBS[$d]:-}" ]] || die "unknown OSWorld domain '$d' (known: ${!DOMAIN_DEBS[*]})"
  # xdotool/wmctrl/dbus are what the set-up steps of every domain use (activate_window, gsettings).
  debs+=(${DOMAIN_DEBS[$d]} ${DOMAIN_DEBS[os]})
done
# pyautogui (OSWorld's `execute` steps) for the sessions' own Python (/usr/bin/python3), outside the
# project tree; sessions see it read-only at /opt/osworld-py (workers/envs/desktop/env.py).
PY_DIR="${OSWORLD_PY_DIR:-/opt/flywheel/osworld-py}"
if [[ ! -d "$PY_DIR/pyautogui" ]]; then
  say "installing pyautogui for the sessions into $PY_DIR"
  as_root mkdir -p "$PY_DIR"
  pip_py="$PY"; [[ -x "$pip_py" ]] || pip_py=python3  # no project venv in the Docker image
  as_root "$pip_py" -m pip install -q --target "$PY_DIR" "pyautogui==0.9.54" "python-xlib==0.33"
  as_root chmod -R a+rX "$PY_DIR"
fi
missing=()
for p in $(printf '%s\n' "${debs[@]}" | sort -u); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then say "OSWorld apps for: $domains: already installed"; exit 0; fi
say "installing for OSWorld domains ($domains): ${missing[*]}"
as_root apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
say "done; import the domains' tasks again (or 'Check tasks' on the pools page) to refresh their flags"
