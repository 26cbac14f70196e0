#!/usr/bin/env bash
# Creates the project-local venv for the python-libmaas compatibility tests at
# .venv/libmaas (git-ignored). Idempotent: does nothing when the pinned set is installed.
# Python: $PYTHON, else python3.11 (preferred: what python-libmaas 0.6.8 was checked on), else python3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${LIBMAAS_VENV:-$root/.venv/libmaas}"
requirements="$here/requirements.txt"

python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys' >/dev/null 2>&1; then
      python="$candidate"
      break
    fi
  done
fi
if [[ -z "$python" ]]; then
  echo "setup-venv: no python3.11 or python3 found" >&2
  exit 2
fi

want="$(sha256sum "$requirements" | cut -d' ' -f1)"
stamp="$venv/.requirements.sha256"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "setup-venv: $venv is up to date"
  exit 0
fi

echo "setup-venv: creating $venv with $("$python" --version 2>&1)"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
echo "$want" > "$stamp"
echo "setup-venv: done"
