#!/bin/sh
# tests/python/run.sh [PYTEST ARGS...]: installs the Python package the way
# docs/PYTHON.md says (a fresh virtual environment with the system's
# packages, `pip install --no-build-isolation`, offline) and runs the tests
# beside this script against it, from a directory outside the source tree
# with ORTMK_EP_DIR unset, so that the installed package and its own
# providers (ortmk/_providers) are what runs.
#
# Exits 77 (skipped) when python3-venv, python3-mesonpy, pytest, numpy or
# onnx are missing.  The install builds the whole project (providers
# included): minutes.  ORTMK_PY_LOG=FILE keeps pip's build log.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
py=/usr/bin/python3

need() {
	if ! "$py" -c "import $1" 2>/dev/null; then
		echo "run.sh: $py cannot import $1 ($2 missing): skipped"
		exit 77
	fi
}
need ensurepip python3-venv
need mesonpy python3-mesonpy
need pytest python3-pytest
need numpy python3-numpy
need onnx python3-onnx

work=$(mktemp -d "${TMPDIR:-/tmp}/ortmk-python-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
log=${ORTMK_PY_LOG:-$work/pip.log}

"$py" -m venv --system-site-packages "$work/venv"
echo "run.sh: pip install --no-build-isolation --no-index $repo (log: $log)"
if ! "$work/venv/bin/pip" install --no-build-isolation --no-index "$repo" >"$log" 2>&1; then
	tail -n 60 "$log"
	echo "run.sh: pip install failed"
	exit 1
fi

# Outside the tree: only the installed package is importable as ortmk.
cd "$work"
env -u ORTMK_EP_DIR ORTMK_PY_INSTALLED=1 PYTHONDONTWRITEBYTECODE=1 \
	"$work/venv/bin/python" -m pytest -p no:cacheprovider -q "$here" "$@"
