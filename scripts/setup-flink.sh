#!/usr/bin/env bash
# Installs the Flink distributions the live test tier runs (a real standalone cluster per release) under
# build/flink/<version>/pyflink: PyPI's apache-flink (scripts, conf) and apache-flink-libraries (the jars), without
# their Python dependencies. Idempotent: a release already installed is left as it is.
#   scripts/setup-flink.sh 1.20.3 2.3.0
set -euo pipefail
cd "$(dirname "$0")/.."
for version in "$@"; do
  home=build/flink/$version/pyflink
  [ -x "$home/bin/start-cluster.sh" ] && [ -f "$home/lib/flink-dist-$version.jar" ] && continue
  echo "setup: installing Flink $version for the live tests into build/flink/$version" >&2
  rm -rf "build/flink/$version"
  .venv/bin/python -m pip install -q --no-deps --no-compile --target "build/flink/$version" \
    "apache-flink==$version" "apache-flink-libraries==$version" >/dev/null
  # the distribution's scripts lose their executable bit in the sdist of some releases
  chmod a+x "$home"/bin/*
done
