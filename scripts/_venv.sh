# Sourced by scripts/serve and scripts/test: make .venv with Python 3.11+ and install Tucano in it
# (a plain, non-editable install, exactly what an operator gets from `pip install .`).
set -eu
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Tucano needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1))." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
install_tucano() {
  # $1: the extras to install, e.g. "[test]" or "".
  .venv/bin/python -m pip install --quiet ".$1"
  # Same version number, new code: make pip replace the installed copy.
  .venv/bin/python -m pip install --quiet --no-deps --force-reinstall .
}
