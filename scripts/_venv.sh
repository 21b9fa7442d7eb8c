# Sourced by scripts/demo and scripts/test: makes .venv with redrive and the
# extra the script needs (``extra``: test by default, demo for the demo),
# reinstalling only when pyproject.toml changes.
set -euo pipefail
extra="${extra:-test}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"

source "$root/scripts/_services.sh"

if [ ! -x "$venv/bin/python" ]; then
  "$(pick_python)" -m venv "$venv"
fi
stamp="$venv/.redrive-installed-$extra"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "setting up $venv (once)..." >&2
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet -e "$root[$extra]" >&2
  echo "$want" > "$stamp"
fi
