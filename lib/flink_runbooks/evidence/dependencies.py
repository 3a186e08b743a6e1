"""What a Flink process had on its classpath and in its plugins directory, as its own start-up lines say.

Every JobManager and TaskManager logs its ``Classpath:`` (lib/ first, then HADOOP_CLASSPATH and the like), whether
Hadoop was found (``Hadoop version: …`` or ``No Hadoop Dependency available``), and one ``Plugin loader with ID …``
line per subfolder of ``plugins/``. Class-loading, file-system and SQL-connector failures are judged against these:
a jar in ``lib/`` that should be a plugin, a plugin folder that is not there, a library present twice.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.model import Event, Incident

CLASSPATH = re.compile(r"\bClasspath: (?P<cp>\S+)")
PLUGIN_LOADER = re.compile(r"Plugin loader with ID (?:not )?found, (?:creating|reusing) it: (?P<id>[\w.+-]+)")
NO_HADOOP = re.compile(r"No Hadoop Dependency available|Hadoop is not in the classpath/dependencies")
HADOOP_VERSION = re.compile(r"\bHadoop version: (?P<v>\d[\w.-]*)")
# The start-up lines above, as line signatures for the pre-filter.
SIGNATURES = (
    r"Classpath: ",
    r"Plugin loader with ID (?:not )?found",
    r"No Hadoop Dependency available|Hadoop is not in the classpath/dependencies|Hadoop version: \d",
)

# The jars a Flink distribution itself puts into lib/ (every release since 1.11; older ones had fewer).
FLINK_LIB_JAR = re.compile(
    r"^(?:flink-(?:dist|table|table-blink|table-api-java-uber|table-planner-loader|table-runtime|cep|csv|json|"
    r"connector-files|scala|python)[\w.-]*|log4j-[\w.-]+|slf4j-[\w.-]+|logback-[\w.-]+)\.jar$")


@dataclass
class ProcessClasspath:
    """One process's start-up view: the jars on its classpath, its plugin folders, whether Hadoop was found."""

    role: str
    event: Event
    jars: list[str] = field(default_factory=list)  # full paths as logged

    @property
    def lib_jars(self) -> list[str]:
        """The jars of Flink's lib/ folder (the parent class loader), by file name."""
        return [j.rsplit("/", 1)[-1] for j in self.jars if re.search(r"/lib/[^/]+\.jar$", j)]

    @property
    def added_lib_jars(self) -> list[str]:
        """Jars in lib/ that no Flink distribution ships: what someone added."""
        return [j for j in self.lib_jars if not FLINK_LIB_JAR.match(j)]


def classpaths(incident: Incident) -> list[ProcessClasspath]:
    """The ``Classpath:`` line of every process start in the logs, in log order."""
    def compute(inc: Incident) -> list[ProcessClasspath]:
        out = []
        for ev, m in inc.find(CLASSPATH):
            jars = [p for p in m["cp"].split(":") if p]
            out.append(ProcessClasspath(ev.role, ev, jars))
        return out
    return incident.derived("dependencies.classpaths", compute)


def jars_matching(incident: Incident, pattern: str | re.Pattern[str]) -> list[tuple[ProcessClasspath, str]]:
    """Jars (full path) on any logged classpath whose file name matches ``pattern``, with the process."""
    rx = re.compile(pattern) if isinstance(pattern, str) else pattern
    return [(cp, jar) for cp in classpaths(incident) for jar in cp.jars if rx.search(jar.rsplit("/", 1)[-1])]


def plugin_ids(incident: Incident) -> set[str] | None:
    """The plugin folders the processes loaded (``plugins/<id>/``), or None when no start-up listing was logged."""
    found = {m["id"] for _, m in incident.find(PLUGIN_LOADER)}
    if found:
        return found
    return set() if classpaths(incident) else None


def plugin_events(incident: Incident) -> list[Event]:
    seen, out = set(), []
    for ev, m in incident.find(PLUGIN_LOADER):
        if m["id"] not in seen:
            seen.add(m["id"])
            out.append(ev)
    return out


def hadoop_present(incident: Incident) -> bool | None:
    """True when a process logged a Hadoop version, False when it logged that Hadoop is absent, else None."""
    if any(incident.find(HADOOP_VERSION)):
        return True
    if any(incident.find(NO_HADOOP)):
        return False
    return None


def hadoop_event(incident: Incident) -> Event | None:
    hit = incident.first(HADOOP_VERSION) or incident.first(NO_HADOOP)
    return hit[0] if hit else None


def resolve_order(incident: Incident) -> tuple[str, str]:
    """``classloader.resolve-order`` in force and where it came from (child-first is Flink's default)."""
    current = incident.config.lookup("classloader.resolve-order")
    if current is None:
        return "child-first", "Flink's default"
    return current.value.strip().lower(), str(current.source)


def closest(word: str, candidates: list[str] | tuple[str, ...]) -> str | None:
    """The candidate nearest to ``word`` by edit distance (at most a third of its length, at least 2), else None."""
    best, best_d = None, None
    for c in candidates:
        d = _distance(word.lower(), c.lower())
        if best_d is None or d < best_d:
            best, best_d = c, d
    limit = max(2, len(word) // 3)
    return best if best_d is not None and 0 < best_d <= limit else None


def _distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]
