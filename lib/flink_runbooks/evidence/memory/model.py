"""Flink's TaskManager memory model (FLIP-49, 1.10+) and JobManager memory model (FLIP-116, 1.11+).

A re-implementation of ``TaskExecutorProcessUtils`` / ``ProcessMemoryUtils`` / ``TaskExecutorFlinkMemoryUtils``
(and ``JobManagerProcessUtils`` / ``JobManagerFlinkMemoryUtils``): same derivation order, same rounding
(fractions are Java floats, ``MemorySize.multiply`` goes through ``BigDecimal.valueOf(double)`` and truncates),
same ``IllegalConfigurationException`` texts and the same INFO/WARN lines Flink logs while deriving.

Everything is a pure function over a flat ``{key: value}`` map (values as written in the config file)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping
from flink_runbooks.vocabulary.units import format_size
from flink_runbooks.evidence.memory.options import (LONG_MAX, MIB, MemoryConfigError, _Config, _Option, _REMOVED_IN_2, _RangeFraction, _TmOptions, _fraction_text,
    _java_double_str, _multiply, _range_fraction, _size_how, _tm_options, _version, _with_fraction,
    _with_inverse_fraction, flink_human_size)

# ---------------------------------------------------------------------------------------------------------------
# TaskManager


POOLS = ("framework_heap", "task_heap", "managed", "network", "framework_off_heap", "task_off_heap",
         "metaspace", "overhead")


@dataclass
class TaskManagerMemory:
    """Every TaskManager memory pool in bytes, as ``TaskExecutorProcessSpec`` holds them."""

    process: int
    flink: int
    framework_heap: int
    task_heap: int
    managed: int
    network: int
    framework_off_heap: int
    task_off_heap: int
    metaspace: int
    overhead: int
    notes: list[str] = field(default_factory=list, compare=False)
    derivation: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def jvm_heap(self) -> int:
        """``-Xmx`` / ``-Xms``."""
        return self.framework_heap + self.task_heap

    @property
    def direct(self) -> int:
        """``-XX:MaxDirectMemorySize``."""
        return self.framework_off_heap + self.task_off_heap + self.network

    @property
    def off_heap(self) -> int:
        """"Total Off-heap Memory" of the start-up print: managed + direct."""
        return self.managed + self.direct

    def rows(self) -> list[tuple[str, int, str]]:
        """The "Final TaskExecutor Memory configuration" breakdown, in its order: ``(label, bytes, how derived)``."""
        d = self.derivation
        return [
            ("Total Process Memory", self.process, d.get("process", "")),
            ("Total Flink Memory", self.flink, d.get("flink", "")),
            ("Total JVM Heap Memory", self.jvm_heap, "framework heap + task heap (-Xmx/-Xms)"),
            ("Framework Heap", self.framework_heap, d.get("framework_heap", "")),
            ("Task Heap", self.task_heap, d.get("task_heap", "")),
            ("Total Off-heap Memory", self.off_heap, "managed + total JVM direct memory"),
            ("Managed Memory", self.managed, d.get("managed", "")),
            ("Total JVM Direct Memory", self.direct,
             "framework off-heap + task off-heap + network (-XX:MaxDirectMemorySize)"),
            ("Framework Off-heap", self.framework_off_heap, d.get("framework_off_heap", "")),
            ("Task Off-heap", self.task_off_heap, d.get("task_off_heap", "")),
            ("Network Memory", self.network, d.get("network", "")),
            ("JVM Metaspace", self.metaspace, d.get("metaspace", "") or "-XX:MaxMetaspaceSize"),
            ("JVM Overhead", self.overhead, d.get("overhead", "")),
        ]

    def log_lines(self) -> list[str]:
        """The block exactly as ``BashJavaUtils`` logs it (message part, without the log prefix)."""
        h = flink_human_size
        return [
            "Final TaskExecutor Memory configuration:",
            f"  Total Process Memory:          {h(self.process)}",
            f"    Total Flink Memory:          {h(self.flink)}",
            f"      Total JVM Heap Memory:     {h(self.jvm_heap)}",
            f"        Framework:               {h(self.framework_heap)}",
            f"        Task:                    {h(self.task_heap)}",
            f"      Total Off-heap Memory:     {h(self.off_heap)}",
            f"        Managed:                 {h(self.managed)}",
            f"        Total JVM Direct Memory: {h(self.direct)}",
            f"          Framework:             {h(self.framework_off_heap)}",
            f"          Task:                  {h(self.task_off_heap)}",
            f"          Network:               {h(self.network)}",
            f"    JVM Metaspace:               {h(self.metaspace)}",
            f"    JVM Overhead:                {h(self.overhead)}",
        ]

    def jvm_parameters(self) -> str:
        """``ProcessMemoryUtils.generateJvmParametersStr``."""
        return (f"-Xmx{self.jvm_heap} -Xms{self.jvm_heap} -XX:MaxDirectMemorySize={self.direct} "
                f"-XX:MaxMetaspaceSize={self.metaspace}")

    def dynamic_configs(self) -> dict[str, str]:
        """The memory part of ``TaskExecutorProcessUtils.generateDynamicConfigsStr`` (``-D key=<bytes>b``)."""
        return {
            "taskmanager.memory.framework.heap.size": f"{self.framework_heap}b",
            "taskmanager.memory.framework.off-heap.size": f"{self.framework_off_heap}b",
            "taskmanager.memory.task.heap.size": f"{self.task_heap}b",
            "taskmanager.memory.task.off-heap.size": f"{self.task_off_heap}b",
            "taskmanager.memory.network.min": f"{self.network}b",
            "taskmanager.memory.network.max": f"{self.network}b",
            "taskmanager.memory.managed.size": f"{self.managed}b",
            "taskmanager.memory.jvm-metaspace.size": f"{self.metaspace}b",
            "taskmanager.memory.jvm-overhead.min": f"{self.overhead}b",
            "taskmanager.memory.jvm-overhead.max": f"{self.overhead}b",
        }


@dataclass
class _FlinkMemory:
    framework_heap: int
    framework_off_heap: int
    task_heap: int
    task_off_heap: int
    network: int
    managed: int

    @property
    def total(self) -> int:
        return (self.framework_heap + self.framework_off_heap + self.task_heap + self.task_off_heap
                + self.network + self.managed)


def _legacy_target(deployment: str, standalone: str) -> str:
    if deployment in ("standalone", "local", "docker"):
        return standalone
    if deployment in ("active", "yarn", "kubernetes", "native-kubernetes", "k8s"):
        return "process"
    raise ValueError(f"unknown deployment {deployment!r}: standalone | yarn | kubernetes")


def _legacy_heap_override(cfg: _Config, target: _Option, heap: _Option | None, heap_mb: _Option | None) -> dict:
    """``MemoryBackwardsCompatibilityUtils.getConfWithLegacyHeapSizeMappedToNewConfigOption``."""
    if cfg.contains(target):
        return {}
    size = None
    if cfg.contains(heap):
        size = cfg.size(heap)
    elif cfg.contains(heap_mb):
        mb = cfg.integer(heap_mb)
        if mb < 0:
            raise MemoryConfigError(f"Configured total process memory size ({mb}MB) must not be less than 0.",
                                    "negative-legacy-heap", (heap_mb.key,), cfg.configured(heap_mb))
        size = mb << 20
    if size is None:
        return {}
    cfg.notes.append(f"'{target.key}' is not specified, use the configured deprecated task manager heap value "
                     f"({flink_human_size(size)}) for it.")
    return {target.key: size}


def _open_config(conf: Mapping[str, object], version, notes: list[str]) -> tuple[_Config, tuple[int, ...]]:
    v = _version(version)
    cfg = _Config(conf, notes)
    if v >= (2, 0):
        for key in _REMOVED_IN_2:
            if key in cfg.raw:
                notes.append(f"'{key}' was removed in Flink 2.0 and is ignored")
    return cfg, v


def _tm_config(conf: Mapping[str, object], version, deployment: str, notes: list[str]) -> tuple[_Config, _TmOptions]:
    cfg, v = _open_config(conf, version, notes)
    o = _tm_options(v)
    target = o.flink if _legacy_target(deployment, "flink") == "flink" else o.process
    try:
        cfg.sizes_override = _legacy_heap_override(cfg, target, o.legacy_heap, o.legacy_heap_mb)
    except MemoryConfigError as e:
        raise e._prefixed("TaskManager failed to map legacy JVM heap option to the new one: ") from None
    return cfg, o


def derive_taskmanager_memory(conf: Mapping[str, object], version: tuple[int, ...] | None = None, *,
                              deployment: str = "standalone") -> TaskManagerMemory:
    """What ``TaskExecutorProcessUtils.processSpecFromConfig`` computes for this configuration.

    ``deployment`` only matters for the legacy ``taskmanager.heap.size``: the standalone scripts map it to
    ``taskmanager.memory.flink.size``, YARN/Kubernetes to ``taskmanager.memory.process.size``.
    Raises :class:`MemoryConfigError` exactly where Flink refuses to start the TaskManager.
    """
    notes: list[str] = []
    try:
        cfg, o = _tm_config(conf, version, deployment, notes)
        try:
            return _TmDerivation(cfg, o).run()
        except MemoryConfigError as e:
            raise e._prefixed("TaskManager memory configuration failed: ") from None
    except MemoryConfigError as e:
        e.notes = notes
        raise


class _TmDerivation:
    """One run of ``ProcessMemoryUtils.memoryProcessSpecFromConfig`` with ``TaskExecutorFlinkMemoryUtils``."""

    def __init__(self, cfg: _Config, o: _TmOptions):
        self.cfg, self.o = cfg, o
        self.how: dict[str, str] = {}

    # ProcessMemoryUtils

    def run(self) -> TaskManagerMemory:
        cfg, o = self.cfg, self.o
        self.fine_grained = cfg.contains(o.task_heap) and cfg.contains(o.managed_size)
        if self.fine_grained:
            flink = self.from_required_fine_grained()
            metaspace, overhead = self.jvm_from_total_flink(flink.total)
            self.how["flink"] = "sum of the components (task heap and managed memory set explicitly)"
        elif cfg.contains(o.flink):
            total_flink = cfg.size(o.flink)
            flink = self.from_total_flink(total_flink)
            metaspace, overhead = self.jvm_from_total_flink(flink.total)
            self.how["flink"] = _size_how(cfg, o.flink)
        elif cfg.contains(o.process):
            process = cfg.size(o.process)
            metaspace, overhead = self.jvm_from_total_process(process)
            flink = self.from_total_flink(process - metaspace - overhead)
            self.how["flink"] = "process - metaspace - overhead"
        else:
            raise MemoryConfigError(
                f"Either required fine-grained memory ({o.task_heap.key} and {o.managed_size.key}), or Total Flink "
                f"Memory size ({o.flink.describe()}), or Total Process Memory size ({o.process.describe()}) need "
                f"to be configured explicitly.", "no-size-configured", (o.process.key, o.flink.key))
        process = flink.total + metaspace + overhead
        self.how["process"] = (_size_how(cfg, o.process) if cfg.contains(o.process)
                               else "flink + metaspace + overhead")
        return TaskManagerMemory(
            process=process, flink=flink.total, framework_heap=flink.framework_heap, task_heap=flink.task_heap,
            managed=flink.managed, network=flink.network, framework_off_heap=flink.framework_off_heap,
            task_off_heap=flink.task_off_heap, metaspace=metaspace, overhead=overhead,
            notes=cfg.notes, derivation=self.how)

    def overhead_range(self) -> _RangeFraction:
        o = self.o
        return _range_fraction(self.cfg, self.cfg.size(o.overhead_min), self.cfg.size(o.overhead_max),
                               o.overhead_fraction, o.overhead_min, o.overhead_max)

    def jvm_from_total_process(self, process: int) -> tuple[int, int]:
        cfg, o = self.cfg, self.o
        metaspace = cfg.size(o.metaspace)
        self.how["metaspace"] = _size_how(cfg, o.metaspace)
        overhead, capped = _with_fraction(cfg, "jvm overhead memory", process, self.overhead_range())
        self.how["overhead"] = f"{_fraction_text(cfg, o.overhead_fraction)} x process{capped}"
        if metaspace + overhead > process:
            raise MemoryConfigError(
                f"Sum of configured JVM Metaspace ({flink_human_size(metaspace)}) and JVM Overhead "
                f"({flink_human_size(overhead)}) exceed configured Total Process Memory "
                f"({flink_human_size(process)}).", "metaspace-overhead-exceed-process",
                (o.process.key, o.metaspace.key, o.overhead_min.key, o.overhead_fraction.key),
                cfg.configured(o.process, o.metaspace, o.overhead_min, o.overhead_max, o.overhead_fraction))
        return metaspace, overhead

    def jvm_from_total_flink(self, total_flink: int) -> tuple[int, int]:
        cfg, o = self.cfg, self.o
        metaspace = cfg.size(o.metaspace)
        self.how["metaspace"] = _size_how(cfg, o.metaspace)
        flink_and_metaspace = total_flink + metaspace
        if cfg.contains(o.process):
            process = cfg.size(o.process)
            metaspace = cfg.size(o.metaspace)
            if process < flink_and_metaspace:
                raise MemoryConfigError(
                    f"The configured Total Process Memory size ({flink_human_size(process)}) is less than the sum "
                    f"of the derived Total Flink Memory size ({flink_human_size(total_flink)}) and the configured "
                    f"or default JVM Metaspace size  ({flink_human_size(metaspace)}).",
                    # with task heap and managed sized explicitly the flink size is their sum: they are too big
                    "fixed-exceeds-flink-memory" if self.fine_grained else "process-less-than-flink-plus-metaspace",
                    (o.process.key, o.flink.key, o.task_heap.key, o.managed_size.key, o.metaspace.key),
                    cfg.configured(o.process, o.flink, o.task_heap, o.managed_size, o.metaspace))
            overhead = process - flink_and_metaspace
            rf = self.overhead_range()
            if overhead > rf.max or overhead < rf.min:
                raise MemoryConfigError(
                    f"Derived JVM Overhead size ({flink_human_size(overhead)}) is not in configured JVM Overhead "
                    f"range [{flink_human_size(rf.min)}, {flink_human_size(rf.max)}].", "overhead-out-of-range",
                    (o.process.key, o.flink.key, o.overhead_min.key, o.overhead_max.key),
                    cfg.configured(o.process, o.flink, o.task_heap, o.managed_size, o.metaspace, o.overhead_min,
                                   o.overhead_max))
            if cfg.contains(o.overhead_fraction) and overhead != _multiply(process, rf.fraction):
                cfg.notes.append(
                    f"The derived JVM Overhead size ({flink_human_size(overhead)}) does not match the configured or "
                    f"default JVM Overhead fraction ({_java_double_str(rf.fraction)}) from the configured Total "
                    f"Process Memory size ({flink_human_size(process)}). The derived JVM Overhead size will be used.")
            self.how["overhead"] = "process - flink - metaspace"
            return metaspace, overhead
        overhead, capped = _with_inverse_fraction(cfg, "jvm overhead memory", flink_and_metaspace,
                                                  self.overhead_range())
        self.how["overhead"] = (f"{_fraction_text(cfg, o.overhead_fraction)} of process, "
                                f"i.e. f/(1-f) x (flink + metaspace){capped}")
        if cfg.contains(o.process):  # ProcessMemoryUtils.sanityCheckTotalProcessMemory
            process = cfg.size(o.process)
            derived = total_flink + metaspace + overhead
            if process != derived:
                raise MemoryConfigError(
                    f"Configured and Derived memory sizes (total {flink_human_size(derived)}) do not add up to the "
                    f"configured Total Process Memory size ({flink_human_size(process)}). Configured and Derived "
                    f"memory sizes are: Total Flink Memory ({flink_human_size(total_flink)}), JVM Metaspace "
                    f"({flink_human_size(metaspace)}), JVM Overhead ({flink_human_size(overhead)}).",
                    "process-size-mismatch", (o.process.key,), cfg.configured(o.process))
        return metaspace, overhead

    # TaskExecutorFlinkMemoryUtils

    def is_using_legacy_network(self) -> bool:
        cfg, o = self.cfg, self.o
        new_style = cfg.contains(o.network_min) or cfg.contains(o.network_max) or cfg.contains(o.network_fraction)
        return not new_style and cfg.contains(o.num_buffers)

    def legacy_network_size(self) -> int:
        cfg, o = self.cfg, self.o
        buffers = cfg.integer(o.num_buffers)
        page = cfg.size(o.segment_size)  # ConfigurationParserUtils.getPageSize
        if page > (1 << 31) - 1:
            raise MemoryConfigError(f"Cannot downcast long value {page} to integer.", "invalid-segment-size",
                                    (o.segment_size.key,), cfg.configured(o.segment_size),
                                    exception="IllegalArgumentException")
        for ok, why in ((page >= 4096, "Minimum memory segment size is 4096"),
                        (page & (page - 1) == 0, "Memory segment size must be a power of 2.")):
            if not ok:
                raise MemoryConfigError(f"Invalid configuration value for {o.segment_size.key} : {page} - {why}",
                                        "invalid-segment-size", (o.segment_size.key,), cfg.configured(o.segment_size))
        self.how["network"] = (f"legacy {o.num_buffers.key}: {buffers} x segment size "
                               f"{format_size(page)}")
        return buffers * page

    def network_range(self) -> _RangeFraction:
        cfg, o = self.cfg, self.o
        return _range_fraction(cfg, cfg.size(o.network_min), cfg.size(o.network_max), o.network_fraction,
                               o.network_min, o.network_max)

    def managed_absolute_or_fraction(self, base: int) -> int:
        cfg, o = self.cfg, self.o
        if cfg.contains(o.managed_size):
            self.how["managed"] = _size_how(cfg, o.managed_size)
            return cfg.size(o.managed_size)
        rf = _range_fraction(cfg, 0, LONG_MAX, o.managed_fraction)
        managed, capped = _with_fraction(cfg, "managed memory", base, rf)
        self.how["managed"] = f"{_fraction_text(cfg, o.managed_fraction)} x flink{capped}"
        return managed

    def fixed_parts(self):
        cfg, o = self.cfg, self.o
        fh, foh, toh = cfg.size(o.framework_heap), cfg.size(o.framework_off_heap), cfg.size(o.task_off_heap)
        self.how["framework_heap"] = _size_how(cfg, o.framework_heap)
        self.how["framework_off_heap"] = _size_how(cfg, o.framework_off_heap)
        self.how["task_off_heap"] = _size_how(cfg, o.task_off_heap)
        return fh, foh, toh

    def fixed_exceeds(self, fh, foh, th, toh, managed, total_flink) -> MemoryConfigError:
        cfg, o = self.cfg, self.o
        h = flink_human_size
        return MemoryConfigError(
            f"Sum of configured Framework Heap Memory ({h(fh)}), Framework Off-Heap Memory ({h(foh)}), Task Heap "
            f"Memory ({h(th)}), Task Off-Heap Memory ({h(toh)}) and Managed Memory ({h(managed)}) exceed "
            f"configured Total Flink Memory ({h(total_flink)}).", "fixed-exceeds-flink-memory",
            (o.task_heap.key, o.managed_size.key, o.framework_heap.key, o.framework_off_heap.key,
             o.task_off_heap.key, o.flink.key, o.process.key),
            cfg.configured(o.process, o.flink, o.task_heap, o.managed_size, o.managed_fraction, o.framework_heap,
                           o.framework_off_heap, o.task_off_heap))

    def from_required_fine_grained(self) -> _FlinkMemory:
        cfg, o = self.cfg, self.o
        th = cfg.size(o.task_heap)
        managed = cfg.size(o.managed_size)
        self.how["task_heap"] = _size_how(cfg, o.task_heap)
        self.how["managed"] = _size_how(cfg, o.managed_size)
        fh, foh, toh = self.fixed_parts()
        without_network = fh + th + foh + toh + managed
        if cfg.contains(o.flink):
            total_flink = cfg.size(o.flink)
            if without_network > total_flink:
                raise self.fixed_exceeds(fh, foh, th, toh, managed, total_flink)
            network = total_flink - without_network
            self.check_remainder_network(network, total_flink)
        elif self.is_using_legacy_network():
            network = self.legacy_network_size()
        else:
            network, capped = _with_inverse_fraction(cfg, "network memory", without_network, self.network_range())
            self.how["network"] = (f"{_fraction_text(cfg, o.network_fraction)} of flink, i.e. f/(1-f) x the other "
                                   f"components{capped}")
        flink = _FlinkMemory(fh, foh, th, toh, network, managed)
        self.check_total_flink(flink)
        return flink

    def from_total_flink(self, total_flink: int) -> _FlinkMemory:
        cfg, o = self.cfg, self.o
        fh, foh, toh = self.fixed_parts()
        h = flink_human_size
        if cfg.contains(o.task_heap):
            th = cfg.size(o.task_heap)
            self.how["task_heap"] = _size_how(cfg, o.task_heap)
            managed = self.managed_absolute_or_fraction(total_flink)
            without_network = fh + foh + th + toh + managed
            if without_network > total_flink:
                raise self.fixed_exceeds(fh, foh, th, toh, managed, total_flink)
            network = total_flink - without_network
            self.check_remainder_network(network, total_flink)
        else:
            managed = self.managed_absolute_or_fraction(total_flink)
            if self.is_using_legacy_network():
                network = self.legacy_network_size()
            else:
                network, capped = _with_fraction(cfg, "network memory", total_flink, self.network_range())
                self.how["network"] = f"{_fraction_text(cfg, o.network_fraction)} x flink{capped}"
            without_task_heap = fh + foh + toh + managed + network
            if without_task_heap > total_flink:
                explicit = fh + foh + toh + (managed if cfg.contains(o.managed_size) else 0)
                explicit += network if self.is_using_legacy_network() else 0
                raise MemoryConfigError(
                    f"Sum of configured Framework Heap Memory ({h(fh)}), Framework Off-Heap Memory ({h(foh)}), Task "
                    f"Off-Heap Memory ({h(toh)}), Managed Memory ({h(managed)}) and Network Memory ({h(network)}) "
                    f"exceed configured Total Flink Memory ({h(total_flink)}).",
                    "fixed-exceeds-flink-memory" if explicit > total_flink else "fractions-exceed-total",
                    (o.managed_fraction.key, o.network_fraction.key, o.overhead_fraction.key, o.managed_size.key,
                     o.network_min.key, o.framework_heap.key, o.framework_off_heap.key, o.task_off_heap.key),
                    cfg.configured(o.process, o.flink, o.managed_fraction, o.managed_size, o.network_fraction,
                                   o.network_min, o.network_max, o.num_buffers, o.overhead_fraction, o.overhead_min,
                                   o.overhead_max, o.metaspace, o.framework_heap, o.framework_off_heap,
                                   o.task_off_heap))
            th = total_flink - without_task_heap
            self.how["task_heap"] = "rest of flink memory"
        flink = _FlinkMemory(fh, foh, th, toh, network, managed)
        self.check_total_flink(flink)
        return flink

    def check_remainder_network(self, network: int, total_flink: int) -> None:
        """``sanityCheckNetworkMemoryWithExplicitlySetTotalFlinkAndHeapMemory``."""
        cfg, o = self.cfg, self.o
        self.how["network"] = "rest of flink memory (task heap / managed sized explicitly)"
        try:
            if self.is_using_legacy_network():
                configured = self.legacy_network_size()
                self.how["network"] = "rest of flink memory (task heap / managed sized explicitly)"
                if network != configured:
                    raise MemoryConfigError(
                        f"Derived Network Memory size ({flink_human_size(network)}) does not match configured "
                        f"Network Memory size ({flink_human_size(configured)}).", "network-buffers-mismatch")
            else:
                rf = self.network_range()
                if network > rf.max or network < rf.min:
                    raise MemoryConfigError(
                        f"Derived Network Memory size ({flink_human_size(network)}) is not in configured Network "
                        f"Memory range [{flink_human_size(rf.min)}, {flink_human_size(rf.max)}].",
                        "network-out-of-range")
                if cfg.contains(o.network_fraction) and network != _multiply(total_flink, rf.fraction):
                    cfg.notes.append(
                        f"The derived Network Memory size ({flink_human_size(network)}) does not match the "
                        f"configured Network Memory fraction ({_java_double_str(rf.fraction)}) from the configured "
                        f"Total Flink Memory size ({flink_human_size(total_flink)}). The derived Network Memory size "
                        f"will be used.")
        except MemoryConfigError as e:
            if e.exception != "IllegalConfigurationException":
                raise
            raise MemoryConfigError(
                "If Total Flink, Task Heap and (or) Managed Memory sizes are explicitly configured then the Network "
                "Memory size is the rest of the Total Flink memory after subtracting all other configured types of "
                "memory, but the derived Network Memory is inconsistent with its configuration.",
                e.constraint, (o.task_heap.key, o.managed_size.key, o.flink.key, o.process.key, o.network_min.key,
                               o.network_max.key, *e.keys),
                cfg.configured(o.process, o.flink, o.task_heap, o.managed_size, o.managed_fraction, o.network_min,
                               o.network_max, o.network_fraction, o.num_buffers),
                cause=e.flink_message) from None

    def check_total_flink(self, flink: _FlinkMemory) -> None:
        cfg, o = self.cfg, self.o
        if cfg.contains(o.flink):
            configured = cfg.size(o.flink)
            if configured != flink.total:
                h = flink_human_size
                raise MemoryConfigError(
                    f"Configured and Derived Flink internal memory sizes (total {h(flink.total)}) do not add up to "
                    f"the configured Total Flink Memory size ({h(configured)}). Configured and Derived Flink internal "
                    f"memory sizes are: Framework Heap Memory ({h(flink.framework_heap)}), Framework Off-Heap Memory "
                    f"({h(flink.framework_off_heap)}), Task Heap Memory ({h(flink.task_heap)}), Task Off-Heap Memory "
                    f"({h(flink.task_off_heap)}), Network Memory ({h(flink.network)}), Managed Memory "
                    f"({h(flink.managed)}).", "flink-size-mismatch", (o.flink.key,), cfg.configured(o.flink))


# ---------------------------------------------------------------------------------------------------------------
# JobManager (FLIP-116)


@dataclass
class JobManagerMemory:
    """Every JobManager memory pool in bytes, as ``JobManagerProcessSpec`` holds them."""

    process: int
    flink: int
    heap: int
    off_heap: int
    metaspace: int
    overhead: int
    notes: list[str] = field(default_factory=list, compare=False)
    derivation: dict[str, str] = field(default_factory=dict, compare=False)

    def rows(self) -> list[tuple[str, int, str]]:
        """The "Final Master Memory configuration" breakdown: ``(label, bytes, how derived)``."""
        d = self.derivation
        return [("Total Process Memory", self.process, d.get("process", "")),
                ("Total Flink Memory", self.flink, d.get("flink", "")),
                ("JVM Heap", self.heap, d.get("heap", "")),
                ("Off-heap", self.off_heap, d.get("off_heap", "")),
                ("JVM Metaspace", self.metaspace, d.get("metaspace", "")),
                ("JVM Overhead", self.overhead, d.get("overhead", ""))]

    def log_lines(self) -> list[str]:
        h = flink_human_size
        return ["Final Master Memory configuration:",
                f"  Total Process Memory: {h(self.process)}",
                f"    Total Flink Memory: {h(self.flink)}",
                f"      JVM Heap:         {h(self.heap)}",
                f"      Off-heap:         {h(self.off_heap)}",
                f"    JVM Metaspace:      {h(self.metaspace)}",
                f"    JVM Overhead:       {h(self.overhead)}"]


def derive_jobmanager_memory(conf: Mapping[str, object], version: tuple[int, ...] | None = None, *,
                             deployment: str = "standalone") -> JobManagerMemory:
    """What ``JobManagerProcessUtils.processSpecFromConfigWithNewOptionToInterpretLegacyHeap`` computes (1.11+).

    Legacy ``jobmanager.heap.size`` maps to ``jobmanager.memory.heap.size`` in standalone scripts and to
    ``jobmanager.memory.process.size`` on YARN/Kubernetes.
    """
    notes: list[str] = []
    cfg, v = _open_config(conf, version, notes)
    if v < (1, 11):
        raise ValueError("the JobManager memory model (FLIP-116) starts with Flink 1.11")
    legacy = v < (2, 0)
    process = _Option("jobmanager.memory.process.size", "size")
    flink = _Option("jobmanager.memory.flink.size", "size")
    heap = _Option("jobmanager.memory.heap.size", "size")
    off_heap = _Option("jobmanager.memory.off-heap.size", "size", 128 * MIB)
    metaspace = _Option("jobmanager.memory.jvm-metaspace.size", "size", 256 * MIB)
    ov_min = _Option("jobmanager.memory.jvm-overhead.min", "size", 192 * MIB)
    ov_max = _Option("jobmanager.memory.jvm-overhead.max", "size", 1 << 30)
    ov_fraction = _Option("jobmanager.memory.jvm-overhead.fraction", "fraction", 0.1)
    target = heap if _legacy_target(deployment, "heap") == "heap" else process
    how: dict[str, str] = {}
    h = flink_human_size

    def overhead_range() -> _RangeFraction:
        return _range_fraction(cfg, cfg.size(ov_min), cfg.size(ov_max), ov_fraction, ov_min, ov_max)

    def make_flink(heap_size: int, off_heap_size: int) -> tuple[int, int]:
        if heap_size < 128 * MIB:  # JobManagerOptions.MIN_JVM_HEAP_SIZE
            notes.append(f"The configured or derived JVM heap memory size ({h(heap_size)}) is less than its "
                         f"recommended minimum value ({h(128 * MIB)})")
        return heap_size, off_heap_size

    def from_total_flink(total: int) -> tuple[int, int]:
        off = cfg.size(off_heap)
        how["off_heap"] = _size_how(cfg, off_heap)
        if total <= off:  # compareTo(...) < 1: the heap must not end up empty
            raise MemoryConfigError(
                f"The configured Total Flink Memory ({h(total)}) is less than the configured Off-heap Memory "
                f"({h(off)}).", "jm-flink-less-than-offheap", (flink.key, off_heap.key),
                cfg.configured(process, flink, off_heap))
        how["heap"] = "rest of flink memory"
        return make_flink(total - off, off)

    def jvm_from_total_flink(total: int) -> tuple[int, int]:
        meta = cfg.size(metaspace)
        how["metaspace"] = _size_how(cfg, metaspace)
        if cfg.contains(process):
            proc = cfg.size(process)
            if proc < total + meta:
                raise MemoryConfigError(
                    f"The configured Total Process Memory size ({h(proc)}) is less than the sum of the derived Total "
                    f"Flink Memory size ({h(total)}) and the configured or default JVM Metaspace size  ({h(meta)}).",
                    "process-less-than-flink-plus-metaspace", (process.key, flink.key, heap.key, metaspace.key),
                    cfg.configured(process, flink, heap, metaspace))
            overhead = proc - total - meta
            rf = overhead_range()
            if overhead > rf.max or overhead < rf.min:
                raise MemoryConfigError(
                    f"Derived JVM Overhead size ({h(overhead)}) is not in configured JVM Overhead range "
                    f"[{h(rf.min)}, {h(rf.max)}].", "overhead-out-of-range",
                    (process.key, flink.key, heap.key, ov_min.key, ov_max.key),
                    cfg.configured(process, flink, heap, metaspace, ov_min, ov_max))
            if cfg.contains(ov_fraction) and overhead != _multiply(proc, rf.fraction):
                notes.append(
                    f"The derived JVM Overhead size ({h(overhead)}) does not match the configured or default JVM "
                    f"Overhead fraction ({_java_double_str(rf.fraction)}) from the configured Total Process Memory "
                    f"size ({h(proc)}). The derived JVM Overhead size will be used.")
            how["overhead"] = "process - flink - metaspace"
            return meta, overhead
        overhead, capped = _with_inverse_fraction(cfg, "jvm overhead memory", total + meta, overhead_range())
        how["overhead"] = f"{_fraction_text(cfg, ov_fraction)} of process{capped}"
        return meta, overhead

    try:
        cfg.sizes_override = _legacy_heap_override(
            cfg, target, _Option("jobmanager.heap.size", "size") if legacy else None,
            _Option("jobmanager.heap.mb", "int") if legacy else None)
        if cfg.contains(heap):
            heap_size = cfg.size(heap)
            off = cfg.size(off_heap)
            how["heap"] = _size_how(cfg, heap)
            how["off_heap"] = _size_how(cfg, off_heap)
            if cfg.contains(flink):
                total = cfg.size(flink)
                if cfg.contains(off_heap):
                    if heap_size + off != total:
                        raise MemoryConfigError(
                            f"Sum of the configured JVM Heap Memory ({h(heap_size)}) and the configured Off-heap "
                            f"Memory ({h(off)}) does not match the configured Total Flink Memory ({h(total)}). "
                            f"Please, make the configuration consistent or configure only one option: either JVM "
                            f"Heap or Total Flink Memory.", "jm-heap-offheap-mismatch",
                            (heap.key, off_heap.key, flink.key), cfg.configured(heap, off_heap, flink))
                else:
                    if heap_size > total:
                        raise MemoryConfigError(
                            f"The configured JVM Heap Memory ({h(heap_size)}) exceeds the configured Total Flink "
                            f"Memory ({h(total)}). Please, make the configuration consistent or configure only one "
                            f"option: either JVM Heap or Total Flink Memory.", "jm-heap-exceeds-flink-memory",
                            (heap.key, flink.key), cfg.configured(heap, flink))
                    derived_off = total - heap_size
                    if derived_off != off:
                        notes.append(
                            f"The Off-Heap Memory size ({h(derived_off)}) is derived the configured Total Flink "
                            f"Memory size ({h(total)}) minus the configured JVM Heap Memory size ({h(heap_size)}). "
                            f"The default Off-Heap Memory size ({h(off)}) is ignored.")
                        how["off_heap"] = "flink - heap"
                    off = derived_off
            heap_size, off = make_flink(heap_size, off)
            meta, overhead = jvm_from_total_flink(heap_size + off)
            how["flink"] = "heap + off-heap"
        elif cfg.contains(flink):
            heap_size, off = from_total_flink(cfg.size(flink))
            meta, overhead = jvm_from_total_flink(heap_size + off)
            how["flink"] = _size_how(cfg, flink)
        elif cfg.contains(process):
            proc = cfg.size(process)
            meta = cfg.size(metaspace)
            how["metaspace"] = _size_how(cfg, metaspace)
            overhead, capped = _with_fraction(cfg, "jvm overhead memory", proc, overhead_range())
            how["overhead"] = f"{_fraction_text(cfg, ov_fraction)} x process{capped}"
            if meta + overhead > proc:
                raise MemoryConfigError(
                    f"Sum of configured JVM Metaspace ({h(meta)}) and JVM Overhead ({h(overhead)}) exceed configured "
                    f"Total Process Memory ({h(proc)}).", "metaspace-overhead-exceed-process",
                    (process.key, metaspace.key, ov_min.key), cfg.configured(process, metaspace, ov_min, ov_fraction))
            heap_size, off = from_total_flink(proc - meta - overhead)
            how["flink"] = "process - metaspace - overhead"
        else:
            raise MemoryConfigError(
                f"Either required fine-grained memory ({heap.key}), or Total Flink Memory size ({flink.describe()}), "
                f"or Total Process Memory size ({process.describe()}) need to be configured explicitly.",
                "no-size-configured", (process.key, flink.key, heap.key))
    except MemoryConfigError as e:
        # 2.0 dropped the legacy-heap wrapper that added the prefix
        wrapped = e if v >= (2, 0) else e._prefixed("JobManager memory configuration failed: ")
        wrapped.notes = notes
        raise wrapped from None
    how["process"] = _size_how(cfg, process) if cfg.contains(process) else "flink + metaspace + overhead"
    return JobManagerMemory(process=heap_size + off + meta + overhead, flink=heap_size + off, heap=heap_size,
                            off_heap=off, metaspace=meta, overhead=overhead, notes=notes, derivation=how)
