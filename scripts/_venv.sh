# Sourced by scripts/serve and scripts/test: make .venv with Python 3.11+ and install Tucano in it
# (a plain, non-editable install, exactly what an operator gets from `pip install .`).
set -eu
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Tucano needs Python 3.11 or newer (found: $("$PYTHON" --version 2>&1))." >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "Setting up Tucano (first run): making .venv with $("$PYTHON" --version 2>&1)..." >&2
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
install_tucano() {
  # $1: the extras to install, e.g. "[test]" or "". Skipped when nothing under src/ nor
  # pyproject.toml changed since the last install with these extras (git writes the files it
  # changes with a fresh time), so a second start takes no pip run and needs no package index.
  stamp=".venv/.installed$1"
  # An install with the test extras has everything a plain one has.
  for done in "$stamp" ".venv/.installed[test]"; do
    if [ -f "$done" ] && [ -z "$(find src pyproject.toml -newer "$done" -print -quit)" ]; then
      return 0
    fi
  done
  touch "$stamp.new"  # before the install: a file changed during it is newer than the stamp
  echo "Installing Tucano$1 and its dependencies into .venv (a minute or two the first time)..." >&2
  .venv/bin/python -m pip install --quiet ".$1"
  # Same version number, new code: make pip replace the installed copy.
  .venv/bin/python -m pip install --quiet --no-deps --force-reinstall .
  mv "$stamp.new" "$stamp"
  echo "Installed." >&2
}
