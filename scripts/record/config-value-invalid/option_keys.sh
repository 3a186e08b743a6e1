#!/bin/bash
# Regenerate lib/flink_runbooks/vocabulary/options.json: every configuration key (and deprecated spelling) that the
# option classes of flink-dist declare, per release: option_keys.sh 1.17.2 1.20.3 2.3.0
# With TYPES_OF="1.13.6 1.17.2 1.19.3 1.20.3 2.3.0" also option_types.json: how each of those releases reads the
# options of numbers, durations and sizes (option_types.py beside this script).
set -eu
FLINK_LAB=${FLINK_LAB:-/opt/flink-lab}
OUT=$(cd "$(dirname "$0")/../../.." && pwd)/lib/flink_runbooks/vocabulary/options.json
TMP=$(mktemp -d)
for v in "$@"; do
  mkdir -p "$TMP/$v"
  (cd "$TMP/$v" && unzip -q -o "$FLINK_LAB/$v/pyflink/lib/flink-dist-$v.jar" 'org/apache/flink/*Options*.class' \
     'org/apache/flink/*Config*.class' 'org/apache/flink/configuration/*' 2>/dev/null || true)
  classes=$(cd "$TMP/$v" && find . -name '*.class' | sed 's#^\./##; s#\.class$##; s#/#.#g' \
            | grep -E 'Options$|Options\$|ConfigConstants|Config$' | grep -v '\$[0-9]')
  (cd "$TMP/$v" && javap -c -constants $classes 2>/dev/null) \
    | grep -oE '// String [a-z][a-zA-Z0-9_-]*(\.[a-zA-Z0-9_<>-]+)+$' | sed 's#// String ##' \
    | grep -vE '^(org|java|javax|com|io|sun|jdk|scala|net)\.' | grep -vE '\.(class|java|jar|yaml|properties|sh|py|so)$' \
    | sort -u > "$TMP/$v.keys"
done
python3 - "$OUT" "$TMP" "$@" <<'PY'
import json, pathlib, sys
out, tmp, versions = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3:]
minors = [".".join(v.split(".")[:2]) for v in versions]
known = {}
for v, m in zip(versions, minors):
    for key in (tmp / f"{v}.keys").read_text().split():
        known.setdefault(key, []).append(m)
# one key per line, so a new release shows in a diff as the keys it adds or drops
items = sorted(known.items())
lines = ["{", f' "releases": {json.dumps(minors)},', ' "keys": {']
lines += [f'  {json.dumps(k)}: {json.dumps(v)}' + ("," if i < len(items) - 1 else "") for i, (k, v) in enumerate(items)]
lines += [" }", "}"]
pathlib.Path(out).write_text("\n".join(lines) + "\n")
print(out, len(known), "keys")
PY
for v in ${TYPES_OF:-}; do
  mkdir -p "$TMP/types-$v"
  jar=$(ls "$FLINK_LAB/$v/pyflink/lib/"flink-dist*.jar)
  (cd "$TMP/types-$v" && unzip -q -o "$jar" 'org/apache/flink/*Options*.class' 'org/apache/flink/configuration/*' \
     2>/dev/null || true)
  classes=$(cd "$TMP/types-$v" && find . -name '*.class' | sed 's#^\./##; s#\.class$##; s#/#.#g' \
            | grep -E 'Options$|Options\$' | grep -v '\$[0-9]')
  (cd "$TMP/types-$v" && javap -c -constants $classes 2>/dev/null) > "$TMP/types-$v.javap"
  pairs="${pairs:-} $(echo "$v" | cut -d. -f1,2)=$TMP/types-$v.javap"
done
if [ -n "${TYPES_OF:-}" ]; then
  python3 "$(dirname "$0")/option_types.py" "$(dirname "$OUT")/option_types.json" $pairs
fi
rm -rf "$TMP"
