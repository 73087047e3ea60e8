#!/usr/bin/env bash
# Installs pymesos, the third-party scheduler library localmesos' interop test
# runs unchanged (tests/tests/pymesos_interop.rs).
#
# pymesos needs `http-parser`, whose C extension does not build on Python
# 3.11 and whose setup.py offers no switch to skip it. http-parser ships a
# pure-Python parser too (`http_parser.pyparser`, which `http_parser.http`
# falls back to), so we install it from its source distribution with the
# extension turned off: setup.py's `run_setup(not IS_PYPY)` becomes
# `run_setup(False)`, the path it takes on PyPy.
#
# Idempotent: returns at once when both import.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
HTTP_PARSER_VERSION="0.9.0"
PYMESOS_VERSION="0.3.15"

if "$PYTHON" -c 'import pymesos, http_parser.http' >/dev/null 2>&1; then
    echo "pymesos already installed"
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if ! "$PYTHON" -c 'import http_parser.http' >/dev/null 2>&1; then
    "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
        "http-parser==${HTTP_PARSER_VERSION}" -d "$tmp"
    tar -xzf "$tmp/http-parser-${HTTP_PARSER_VERSION}.tar.gz" -C "$tmp"
    src="$tmp/http-parser-${HTTP_PARSER_VERSION}"
    grep -q 'run_setup(not IS_PYPY)' "$src/setup.py" || {
        echo "http-parser's setup.py changed: cannot turn its C extension off" >&2
        exit 1
    }
    sed -i 's/run_setup(not IS_PYPY)/run_setup(False)/' "$src/setup.py"
    # A prebuilt macOS extension ships in the sdist; it must not be picked up.
    rm -f "$src"/http_parser/*.so
    "$PYTHON" -m pip install --quiet "$src"
fi

"$PYTHON" -m pip install --quiet "pymesos==${PYMESOS_VERSION}"
"$PYTHON" -c 'import pymesos, http_parser.http; print("pymesos installed")'
