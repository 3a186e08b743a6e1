#!/usr/bin/env bash
# Creates .venv at the repository root with the pinned dependencies, the package itself and a Jupyter kernel.
# Idempotent: does nothing when requirements.txt and pyproject.toml have not changed since the last run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

need_java() {
  command -v java >/dev/null 2>&1 || return 0
  local major
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ -z "$major" ] && return 0
  [ "$major" -lt 17 ]
}
if need_java; then
  echo "setup: Java 17 is required by Spark 4; installing openjdk-17-jre-headless with apt" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup: cannot install Java without root; install a Java 17 runtime and re-run" >&2; exit 2; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

if [ ! -x /usr/bin/chromium ]; then
  echo "setup: the site's browser tests need Chromium; installing Debian's chromium with apt" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup: cannot install chromium without root; install Debian's chromium package and re-run" >&2; exit 2; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
fi

if [ ! -x /usr/bin/promtool ] || [ ! -x /usr/bin/prometheus-alertmanager ]; then
  echo "setup: the alert-rule tests need Prometheus and Alertmanager; installing Debian's packages with apt" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup: cannot install prometheus without root; install Debian's prometheus and prometheus-alertmanager" >&2
    exit 2; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq prometheus prometheus-alertmanager >/dev/null
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "setup: Python 3.11 or newer is required (found $("$PYTHON" --version 2>&1))" >&2; exit 2
fi

stamp=.venv/.setup-stamp
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/flink-runbooks ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -r requirements.txt
.venv/bin/python -m pip install -q --no-deps -e .
# jsonschema compiles an RFC 3987 grammar at import time when the optional rfc3987-syntax is installed (1.5 s in
# every process that imports nbformat: each papermill run, each page conversion). Nothing here validates IRIs.
.venv/bin/python -m pip uninstall -q -y rfc3987-syntax >/dev/null 2>&1 || true
# The runbooks run on a named kernel that points at this venv, so papermill and Jupyter use the same packages.
.venv/bin/python -m ipykernel install --sys-prefix --name flink-runbooks --display-name "flink-runbooks (.venv)" >/dev/null
echo "$want" > "$stamp"
echo "setup: environment ready in $root/.venv" >&2
