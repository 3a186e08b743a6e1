"""How each release reads the options whose values carry a number, a duration or a size, from ``javap -c`` of its
option classes: the type builder after ``ConfigOptions.key("...")`` (``longType()``, ``durationType()``...), or the
boxed default of releases before typed builders. Writes lib/flink_runbooks/vocabulary/option_types.json.

    option_types.py OUT RELEASE=JAVAP_OUTPUT [RELEASE=JAVAP_OUTPUT ...]
"""
import json
import pathlib
import re
import sys

LDC = re.compile(r"ldc(?:_w)?\s+#\d+\s+// String (.+)$")
KEY = re.compile(r"invokestatic .*ConfigOptions\.key:")
BOX = re.compile(r"invokestatic .*java/lang/(Long|Integer|Boolean|Double|Float)\.valueOf:")
TYPED = re.compile(r"invokevirtual .*ConfigOptions\$OptionBuilder\.(\w+)Type:")
DEFAULT = re.compile(r"invokevirtual .*ConfigOptions\$OptionBuilder\.defaultValue:\((L[\w/]+;|[JIZDF])\)")
# only the types whose values a user writes as a number, a duration or a size
KINDS = {"long": "number", "int": "number", "Long": "number", "Integer": "number", "J": "number", "I": "number",
         "duration": "duration", "Duration": "duration", "memory": "memory size", "MemorySize": "memory size"}


def types(javap: str) -> dict[str, str]:
    out, last, pending, boxed = {}, None, None, None
    for line in javap.splitlines():
        if m := LDC.search(line):
            last = m.group(1).strip()
        elif KEY.search(line):
            pending, boxed = last, None
        elif pending and (m := BOX.search(line)):
            boxed = m.group(1)
        elif pending and (m := TYPED.search(line)):
            out[pending], pending = m.group(1), None
        elif pending and (m := DEFAULT.search(line)):
            arg = m.group(1).split("/")[-1].rstrip(";")
            out[pending], pending = (boxed if arg == "Object" and boxed else arg), None
    return {key: KINDS[t] for key, t in out.items() if t in KINDS}


def main(out: str, pairs: list[str]) -> None:
    releases, table = [], {}
    for pair in pairs:
        release, path = pair.split("=", 1)
        releases.append(release)
        for key, kind in types(pathlib.Path(path).read_text()).items():
            table.setdefault(key, {})[release] = kind
    items = sorted(table.items())
    lines = ["{", f' "releases": {json.dumps(releases)},', ' "types": {']
    lines += [f"  {json.dumps(k)}: {json.dumps(v)}" + ("," if i < len(items) - 1 else "") for i, (k, v) in enumerate(items)]
    lines += [" }", "}"]
    pathlib.Path(out).write_text("\n".join(lines) + "\n")
    print(out, len(items), "keys")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
