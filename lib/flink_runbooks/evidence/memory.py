"""Flink's TaskManager memory model (FLIP-49, 1.10+) and JobManager memory model (FLIP-116, 1.11+).

A re-implementation of ``TaskExecutorProcessUtils`` / ``ProcessMemoryUtils`` / ``TaskExecutorFlinkMemoryUtils``
(and ``JobManagerProcessUtils`` / ``JobManagerFlinkMemoryUtils``): same derivation order, same rounding
(fractions are Java floats, ``MemorySize.multiply`` goes through ``BigDecimal.valueOf(double)`` and truncates),
same ``IllegalConfigurationException`` texts and the same INFO/WARN lines Flink logs while deriving.

Everything is a pure function over a flat ``{key: value}`` map (values as written in the config file).
"""
from __future__ import annotations

import decimal
import math
import re
import struct
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from flink_runbooks.parse.units import format_size, parse_memory_size

__all__ = [
    "MemoryConfigError", "TaskManagerMemory", "JobManagerMemory",
    "derive_taskmanager_memory", "derive_jobmanager_memory",
    "parse_logged_breakdown", "parse_logged_jobmanager_breakdown",
    "suggest_fix", "grow_pool", "summarize", "flink_human_size",
    "POOLS", "CONSTRAINTS",
]

LONG_MAX = (1 << 63) - 1
MIB = 1 << 20
DEFAULT_VERSION = (1, 20)
DISTRO_PROCESS_SIZE = "1728m"  # what the distribution's flink-conf.yaml ships since 1.11
USABLE_TASK_HEAP = 128 * MIB  # repairs try not to leave less task heap than this

# constraint slug -> what it means (the slug is MemoryConfigError.constraint)
CONSTRAINTS = {
    "no-size-configured": "none of process.size, flink.size or task.heap.size+managed.size is set",
    "fractions-exceed-total": "fraction-derived managed/network memory plus fixed sizes do not fit into total "
                              "Flink memory",
    "fixed-exceeds-flink-memory": "explicitly sized components alone do not fit into total Flink memory "
                                  "(or, with task heap and managed sized, into process - metaspace)",
    "network-out-of-range": "network memory left over after explicit sizes is outside [network.min, network.max]",
    "network-buffers-mismatch": "network memory left over differs from the legacy "
                                "taskmanager.network.numberOfBuffers size",
    "network-min-gt-max": "taskmanager.memory.network.min > taskmanager.memory.network.max",
    "overhead-min-gt-max": "jvm-overhead.min > jvm-overhead.max",
    "fraction-out-of-range": "a memory fraction is not in [0, 1)",
    "metaspace-overhead-exceed-process": "JVM metaspace + JVM overhead exceed total process memory",
    "process-less-than-flink-plus-metaspace": "process.size < flink.size + metaspace (both totals set)",
    "overhead-out-of-range": "process - flink - metaspace, the JVM overhead, is outside "
                             "[jvm-overhead.min, jvm-overhead.max]",
    "flink-size-mismatch": "components do not add up to the configured total Flink memory",
    "process-size-mismatch": "components do not add up to the configured total process memory",
    "invalid-value": "a value cannot be parsed",
    "invalid-segment-size": "taskmanager.memory.segment-size is below 4096 bytes or not a power of two",
    "negative-legacy-heap": "taskmanager.heap.mb / jobmanager.heap.mb is negative",
    "overflow": "a derived size overflows a Java long",
    "jm-heap-exceeds-flink-memory": "jobmanager.memory.heap.size > jobmanager.memory.flink.size",
    "jm-heap-offheap-mismatch": "jobmanager heap + off-heap differ from the configured jobmanager flink size",
    "jm-flink-less-than-offheap": "jobmanager.memory.flink.size < jobmanager.memory.off-heap.size",
}

# ---------------------------------------------------------------------------------------------------------------
# Java value semantics


def _java_double_str(d: float) -> str:
    """``Double.toString``: plain notation in [1e-3, 1e7), else ``1.0E-4`` style; always a fractional digit."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "Infinity" if d > 0 else "-Infinity"
    if d == 0:
        return "-0.0" if math.copysign(1.0, d) < 0 else "0.0"
    dec = decimal.Decimal(repr(d))
    if 1e-3 <= abs(d) < 1e7:
        s = format(dec, "f")
        return s if "." in s else s + ".0"
    sign, digits, exp = dec.normalize().as_tuple()
    mantissa = "".join(map(str, digits))
    exponent = exp + len(mantissa) - 1
    mantissa = mantissa[0] + "." + (mantissa[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{exponent}"


def _to_float32(x: float) -> float:
    """A Java ``float`` widened to ``double`` (config fractions are ``Float`` options)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


_WIDE = decimal.Context(prec=200)


def _multiply(num_bytes: int, multiplier: float) -> int:
    """``MemorySize.multiply(double)``: the exact product of bytes and ``Double.toString(multiplier)``, truncated."""
    if multiplier < 0:
        raise MemoryConfigError("multiplier must be >= 0", "invalid-value", exception="IllegalArgumentException")
    product = _WIDE.multiply(decimal.Decimal(num_bytes), decimal.Decimal(_java_double_str(multiplier)))
    if product > LONG_MAX:
        raise MemoryConfigError("long overflow", "overflow", exception="ArithmeticException")
    return int(product)


_UNITS = ((1 << 40, "tb"), (1 << 30, "gb"), (1 << 20, "mb"), (1 << 10, "kb"))


def flink_human_size(num_bytes: int) -> str:
    """``MemorySize.toHumanReadableString``: ``1.688gb (1811939328 bytes)``, ``0 bytes``, ``1024 bytes``."""
    for factor, unit in _UNITS:
        if num_bytes > factor:
            approx = decimal.Decimal(repr(1.0 * num_bytes / factor))
            rounded = approx.quantize(decimal.Decimal("0.001"), rounding=decimal.ROUND_HALF_UP)  # Java Formatter
            return f"{format(rounded, 'f')}{unit} ({num_bytes} bytes)"
    return f"{num_bytes} bytes"


def _size_value(num_bytes: int) -> str:
    """A config value for a size: the shortest exact unit, bytes otherwise."""
    text = format_size(num_bytes)
    return text if parse_memory_size(text) == num_bytes else f"{num_bytes}b"


def _approx(num_bytes: int) -> str:
    """``172.8m`` for derivation texts: exact units when they fit, else mebibytes with one decimal."""
    if num_bytes >= LONG_MAX:
        return "unbounded"
    text = format_size(num_bytes)
    return text if parse_memory_size(text) == num_bytes else f"{num_bytes / MIB:.1f}m"


def _fraction_value(fraction: float) -> str:
    return f"{fraction:.3f}".rstrip("0").rstrip(".") or "0"


# ---------------------------------------------------------------------------------------------------------------
# errors


class MemoryConfigError(ValueError):
    """Flink would refuse to start: ``IllegalConfigurationException`` (or the parse error) it would throw.

    ``flink_message`` is Flink's exception message as it appears after ``IllegalConfigurationException:`` in the
    log; ``str(error)`` adds the configured keys involved. ``constraint`` is a slug from :data:`CONSTRAINTS`.
    """

    def __init__(self, flink_message: str, constraint: str, keys: Iterable[str] = (),
                 values: Mapping[str, str] | None = None, cause: str | None = None,
                 exception: str = "IllegalConfigurationException"):
        self.flink_message = flink_message
        self.exception = exception  # the Java exception class Flink throws
        self.constraint = constraint
        self.keys = tuple(keys)
        self.values = dict(values or {})
        self.cause = cause
        self.notes: list[str] = []  # what Flink logged before failing (e.g. the legacy heap mapping)
        text = flink_message
        if cause:
            text += f" Cause: {cause}"
        if self.values:
            text += " [configured: " + ", ".join(f"{k}: {v}" for k, v in self.values.items()) + "]"
        elif self.keys:
            text += " [keys: " + ", ".join(self.keys) + "]"
        super().__init__(text)

    def _prefixed(self, prefix: str) -> "MemoryConfigError":
        if self.exception != "IllegalConfigurationException":
            return self  # only IllegalConfigurationException gets wrapped with Flink's context prefix
        return MemoryConfigError(prefix + self.flink_message, self.constraint, self.keys, self.values, self.cause)


# ---------------------------------------------------------------------------------------------------------------
# options


@dataclass(frozen=True)
class _Option:
    key: str
    kind: str  # size | fraction | int
    default: object = None  # bytes for sizes, float for fractions
    deprecated: tuple[str, ...] = ()

    def describe(self) -> str:
        """``ConfigOption.toString`` (used verbatim in the "need to be configured explicitly" message)."""
        fallback = ", ".join(f"{{key={k}, isDeprecated=true}}" for k in self.deprecated)
        return f"Key: '{self.key}' , default: {self._default_text()} (fallback keys: [{fallback}])"

    def _default_text(self) -> str:
        if self.default is None:
            return "null"
        if self.kind == "size":
            return _memory_size_to_string(self.default)
        return str(self.default)


def _memory_size_to_string(num_bytes: int) -> str:
    """``MemorySize.toString``: the largest unit dividing the size exactly."""
    for factor, unit in _UNITS:
        if num_bytes and num_bytes % factor == 0:
            return f"{num_bytes // factor} {unit}"
    return f"{num_bytes} bytes"


def _version(version) -> tuple[int, ...]:
    if version is None:
        return DEFAULT_VERSION
    if isinstance(version, str):
        version = tuple(int(p) for p in re.findall(r"\d+", version)[:3])
    version = tuple(version)
    if version < (1, 10):
        raise ValueError(f"Flink {'.'.join(map(str, version))} predates the FLIP-49 memory model (1.10)")
    return version


@dataclass(frozen=True)
class _TmOptions:
    process: _Option
    flink: _Option
    framework_heap: _Option
    task_heap: _Option
    framework_off_heap: _Option
    task_off_heap: _Option
    managed_size: _Option
    managed_fraction: _Option
    network_min: _Option
    network_max: _Option
    network_fraction: _Option
    metaspace: _Option
    overhead_min: _Option
    overhead_max: _Option
    overhead_fraction: _Option
    segment_size: _Option
    num_buffers: _Option | None
    legacy_heap: _Option | None
    legacy_heap_mb: _Option | None


def _tm_options(version: tuple[int, ...]) -> _TmOptions:
    legacy = version < (2, 0)  # 2.0 dropped the legacy heap keys and numberOfBuffers, not the deprecated aliases
    return _TmOptions(
        process=_Option("taskmanager.memory.process.size", "size"),
        flink=_Option("taskmanager.memory.flink.size", "size"),
        framework_heap=_Option("taskmanager.memory.framework.heap.size", "size", 128 * MIB),
        task_heap=_Option("taskmanager.memory.task.heap.size", "size"),
        framework_off_heap=_Option("taskmanager.memory.framework.off-heap.size", "size", 128 * MIB),
        task_off_heap=_Option("taskmanager.memory.task.off-heap.size", "size", 0),
        managed_size=_Option("taskmanager.memory.managed.size", "size", None,
                             ("taskmanager.memory.size",)),
        managed_fraction=_Option("taskmanager.memory.managed.fraction", "fraction", 0.4),
        network_min=_Option("taskmanager.memory.network.min", "size", 64 * MIB,
                            ("taskmanager.network.memory.min",)),
        # unbounded since 1.17, 1g before
        network_max=_Option("taskmanager.memory.network.max", "size", LONG_MAX if version >= (1, 17) else 1 << 30,
                            ("taskmanager.network.memory.max",)),
        network_fraction=_Option("taskmanager.memory.network.fraction", "fraction", 0.1,
                                 ("taskmanager.network.memory.fraction",)),
        # FLINK-16406 raised the 1.10.0 default of 96m
        metaspace=_Option("taskmanager.memory.jvm-metaspace.size", "size",
                          96 * MIB if version[:3] < (1, 10, 1) else 256 * MIB),
        overhead_min=_Option("taskmanager.memory.jvm-overhead.min", "size", 192 * MIB),
        overhead_max=_Option("taskmanager.memory.jvm-overhead.max", "size", 1 << 30),
        overhead_fraction=_Option("taskmanager.memory.jvm-overhead.fraction", "fraction", 0.1),
        segment_size=_Option("taskmanager.memory.segment-size", "size", 32 << 10),
        num_buffers=_Option("taskmanager.network.numberOfBuffers", "int", 2048) if legacy else None,
        legacy_heap=_Option("taskmanager.heap.size", "size") if legacy else None,
        legacy_heap_mb=_Option("taskmanager.heap.mb", "int") if legacy else None,
    )


_REMOVED_IN_2 = ("taskmanager.heap.size", "taskmanager.heap.mb", "taskmanager.network.numberOfBuffers",
                 "jobmanager.heap.size", "jobmanager.heap.mb")


def _clean(value) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text


class _Config:
    """``org.apache.flink.configuration.Configuration`` over a flat map: contains/get with deprecated keys."""

    def __init__(self, conf: Mapping[str, object], notes: list[str]):
        self.raw = {str(k).strip(): _clean(v) for k, v in conf.items() if v is not None}
        self.sizes_override: dict[str, int] = {}  # the legacy heap mapped onto a new option, in bytes
        self.notes = notes
        self._warned: set[str] = set()

    def source_key(self, opt: _Option) -> str | None:
        if opt.key in self.sizes_override or opt.key in self.raw:
            return opt.key
        for key in opt.deprecated:
            if key in self.raw:
                return key
        return None

    def contains(self, opt: _Option | None) -> bool:
        return opt is not None and self.source_key(opt) is not None

    def raw_value(self, opt: _Option) -> str | None:
        key = self.source_key(opt)
        if key is None:
            return None
        if key in self.sizes_override:
            return _size_value(self.sizes_override[key])
        return self.raw[key]

    def _lookup(self, opt: _Option) -> str | None:
        key = self.source_key(opt)
        if key is not None and key != opt.key and key not in self._warned:
            self._warned.add(key)
            self.notes.append(f"Config uses deprecated configuration key '{key}' instead of proper key '{opt.key}'")
        return None if key is None else self.raw[key]

    def size(self, opt: _Option) -> int:
        """``ProcessMemoryUtils.getMemorySizeFromConfig``."""
        if opt.key in self.sizes_override:
            return self.sizes_override[opt.key]
        text = self._lookup(opt)
        if text is None:
            if opt.default is None:
                raise MemoryConfigError("The memory option is not set and has no default value.", "invalid-value",
                                        (opt.key,))
            return opt.default
        num = parse_memory_size(text) if re.fullmatch(r"\s*\d+\s*[a-zA-Z]*\s*", text) else None
        if num is None or num > LONG_MAX:
            raise MemoryConfigError(f"Cannot read memory size from config option '{opt.key}'.", "invalid-value",
                                    (opt.key,), {self.source_key(opt): text},
                                    cause=f"Could not parse value '{text}' for key '{opt.key}'.")
        return num

    def fraction(self, opt: _Option) -> float:
        text = self._lookup(opt)
        if text is None:
            return _to_float32(opt.default)
        try:
            value = float(re.sub(r"[fFdD]$", "", text.strip()))
            # Float.parseFloat: beyond the float range is +-Infinity
            return _to_float32(value) if abs(value) <= 3.4028234663852886e38 else math.copysign(math.inf, value)
        except ValueError:
            raise MemoryConfigError(f"Could not parse value '{text}' for key '{opt.key}'.", "invalid-value",
                                    (opt.key,), {self.source_key(opt): text},
                                    exception="IllegalArgumentException") from None

    def integer(self, opt: _Option) -> int:
        text = self._lookup(opt)
        if text is None:
            return opt.default
        try:
            value = int(text.strip())
        except ValueError:
            value = None
        if value is None or not -(1 << 31) <= value < (1 << 31):
            raise MemoryConfigError(f"Could not parse value '{text}' for key '{opt.key}'.", "invalid-value",
                                    (opt.key,), {self.source_key(opt): text}, exception="IllegalArgumentException")
        return value

    def configured(self, *opts: _Option | None) -> dict[str, str]:
        out = {}
        for opt in opts:
            if opt is not None and self.contains(opt):
                out[self.source_key(opt)] = self.raw_value(opt)
        return out


@dataclass(frozen=True)
class _RangeFraction:
    min: int
    max: int
    fraction: float


def _range_fraction(cfg: _Config, min_size: int, max_size: int, fraction_opt: _Option,
                    min_opt: _Option | None = None, max_opt: _Option | None = None) -> _RangeFraction:
    """``ProcessMemoryUtils.getRangeFraction``: the ``RangeFraction`` checks, rethrown as config errors."""
    fraction = cfg.fraction(fraction_opt)
    if min_size > max_size or not 0 <= fraction < 1:
        if min_size > max_size:
            constraint = "network-min-gt-max" if "network" in fraction_opt.key else "overhead-min-gt-max"
            cause = "min value must be less or equal to max value"
        else:
            constraint, cause = "fraction-out-of-range", "fraction must be in range [0, 1)"
        raise MemoryConfigError(
            f"Inconsistently configured {fraction_opt.describe()} ({_java_double_str(fraction)}) and its min "
            f"({flink_human_size(min_size)}), max ({flink_human_size(max_size)}) value",
            constraint, [o.key for o in (fraction_opt, min_opt, max_opt) if o is not None],
            cfg.configured(fraction_opt, min_opt, max_opt), cause=cause)
    return _RangeFraction(min_size, max_size, fraction)


def _cap_to_min_max(cfg: _Config, name: str, derived: int, rf: _RangeFraction) -> tuple[int, str]:
    """``ProcessMemoryUtils.capToMinMax``; returns the size and how the cap applied."""
    if derived > rf.max:
        cfg.notes.append(f"The derived from fraction {name} ({flink_human_size(derived)}) is greater than its max "
                         f"value {flink_human_size(rf.max)}, max value will be used instead")
        return rf.max, f" = {_approx(derived)} > max {_approx(rf.max)}, max used"
    if derived < rf.min:
        cfg.notes.append(f"The derived from fraction {name} ({flink_human_size(derived)}) is less than its min "
                         f"value {flink_human_size(rf.min)}, min value will be used instead")
        return rf.min, f" = {_approx(derived)} < min {_approx(rf.min)}, min used"
    return derived, ""


def _with_fraction(cfg: _Config, name: str, base: int, rf: _RangeFraction) -> tuple[int, str]:
    size, capped = _cap_to_min_max(cfg, name, _multiply(base, rf.fraction), rf)
    return size, capped


def _with_inverse_fraction(cfg: _Config, name: str, base: int, rf: _RangeFraction) -> tuple[int, str]:
    size, capped = _cap_to_min_max(cfg, name, _multiply(base, rf.fraction / (1 - rf.fraction)), rf)
    return size, capped


def _fraction_text(cfg: _Config, opt: _Option) -> str:
    raw = cfg.raw_value(opt)
    return f"{raw} ({cfg.source_key(opt)})" if raw is not None else f"{opt.default} (default {opt.key})"


def _size_how(cfg: _Config, opt: _Option) -> str:
    if cfg.contains(opt):
        return f"configured {cfg.source_key(opt)}: {cfg.raw_value(opt)}"
    return f"default {format_size(opt.default) if opt.default else '0'} ({opt.key})"


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


# ---------------------------------------------------------------------------------------------------------------
# reading the effective memory back from logs

_BYTES_IN_VALUE = re.compile(r"\((\d+) bytes\)|^(\d+) bytes")
_TM_BLOCK_LABELS = {
    "Total Process Memory": "process", "Total Flink Memory": "flink", "Total JVM Heap Memory": "jvm_heap",
    "Total Off-heap Memory": "off_heap", "Managed": "managed", "Total JVM Direct Memory": "direct",
    "Network": "network", "JVM Metaspace": "metaspace", "JVM Overhead": "overhead",
}
_TM_BLOCK_LINE = re.compile(
    r"(?:^|\s-\s)\s*(Total Process Memory|Total Flink Memory|Total JVM Heap Memory|Framework|Task|"
    r"Total Off-heap Memory|Managed|Total JVM Direct Memory|Network|JVM Metaspace|JVM Overhead):\s+(.+?)\s*$")
_SPEC_FIELDS = {
    "frameworkHeapSize": "framework_heap", "frameworkOffHeapSize": "framework_off_heap", "taskHeapSize": "task_heap",
    "taskOffHeapSize": "task_off_heap", "networkMemSize": "network", "managedMemorySize": "managed",
    "jvmMetaspaceSize": "metaspace", "jvmOverheadSize": "overhead",
}
_DYNAMIC_FIELDS = {
    "taskmanager.memory.framework.heap.size": "framework_heap",
    "taskmanager.memory.framework.off-heap.size": "framework_off_heap",
    "taskmanager.memory.task.heap.size": "task_heap", "taskmanager.memory.task.off-heap.size": "task_off_heap",
    "taskmanager.memory.network.min": "network", "taskmanager.memory.managed.size": "managed",
    "taskmanager.memory.jvm-metaspace.size": "metaspace", "taskmanager.memory.jvm-overhead.min": "overhead",
}


def _value_bytes(text: str) -> int | None:
    m = _BYTES_IN_VALUE.search(text.strip())
    return int(m.group(1) or m.group(2)) if m else None


def _from_pools(pools: dict[str, int], source: str) -> TaskManagerMemory | None:
    if not all(p in pools for p in POOLS):
        return None
    flink = sum(pools[p] for p in POOLS if p not in ("metaspace", "overhead"))
    return TaskManagerMemory(process=flink + pools["metaspace"] + pools["overhead"], flink=flink,
                             **{p: pools[p] for p in POOLS}, notes=[f"read from {source}"],
                             derivation={p: f"logged ({source})" for p in (*POOLS, "process", "flink")})


def _parse_block(lines: list[str]) -> TaskManagerMemory | None:
    found: dict[str, int] = {}
    section = "heap"
    for line in lines:
        m = _TM_BLOCK_LINE.search(line)
        if not m:
            continue
        label, value = m.group(1), _value_bytes(m.group(2))
        if value is None:
            continue
        if label == "Total JVM Heap Memory":
            section = "heap"
        elif label == "Total JVM Direct Memory":
            section = "direct"
        if label in ("Framework", "Task"):
            pool = "framework" if label == "Framework" else "task"
            found[pool + ("_heap" if section == "heap" else "_off_heap")] = value
        else:
            found[_TM_BLOCK_LABELS[label]] = value
        if label == "JVM Overhead":
            break
    mem = _from_pools(found, "Final TaskExecutor Memory configuration")
    if mem is None:
        return None
    # the printed totals are authoritative when present
    mem.process = found.get("process", mem.process)
    mem.flink = found.get("flink", mem.flink)
    return mem


def parse_logged_breakdown(lines: Iterable[str] | str) -> TaskManagerMemory | None:
    """The effective TaskManager memory from a log: the last "Final TaskExecutor Memory configuration" block
    (with or without log prefixes), else the last ``TaskExecutorProcessSpec {...}`` (YARN/K8s resource manager),
    else the last ``-D taskmanager.memory.*=<n>b`` dynamic properties. None when none of them is there."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    lines = list(lines)
    for i in range(len(lines) - 1, -1, -1):
        if "Final TaskExecutor Memory configuration:" in lines[i]:
            mem = _parse_block(lines[i + 1:i + 40])
            if mem is not None:
                return mem
    for line in reversed(lines):
        if "TaskExecutorProcessSpec {" in line:
            pools = {}
            spec = line.split("TaskExecutorProcessSpec {", 1)[1]
            for name, value in re.findall(r"(\w+)=([^,}]*(?:\([^)]*\))?)", spec):
                if name in _SPEC_FIELDS and _value_bytes(value) is not None:
                    pools[_SPEC_FIELDS[name]] = _value_bytes(value)
            mem = _from_pools(pools, "TaskExecutorProcessSpec")
            if mem is not None:
                return mem
    for line in reversed(lines):
        if "-D taskmanager.memory." in line:
            pools = {_DYNAMIC_FIELDS[k]: int(v)
                     for k, v in re.findall(r"-D\s*(taskmanager\.memory\.[\w.-]+)=(\d+)b?", line)
                     if k in _DYNAMIC_FIELDS}
            mem = _from_pools(pools, "TaskManager dynamic properties")
            if mem is not None:
                return mem
    return None


_JM_LINE = re.compile(r"(Total Process Memory|Total Flink Memory|JVM Heap|Off-heap|JVM Metaspace|JVM Overhead):"
                      r"\s+(.+?)\s*$")


def parse_logged_jobmanager_breakdown(lines: Iterable[str] | str) -> JobManagerMemory | None:
    """The last "Final Master Memory configuration" block of a JobManager log."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    lines = list(lines)
    names = {"Total Process Memory": "process", "Total Flink Memory": "flink", "JVM Heap": "heap",
             "Off-heap": "off_heap", "JVM Metaspace": "metaspace", "JVM Overhead": "overhead"}
    for i in range(len(lines) - 1, -1, -1):
        if "Final Master Memory configuration:" in lines[i]:
            found = {}
            for line in lines[i + 1:i + 12]:
                m = _JM_LINE.search(line)
                if m and _value_bytes(m.group(2)) is not None:
                    found[names[m.group(1)]] = _value_bytes(m.group(2))
            if len(found) == len(names):
                return JobManagerMemory(**found, notes=["read from Final Master Memory configuration"])
    return None


# ---------------------------------------------------------------------------------------------------------------
# repairs

Changes = dict[str, str | None]


def _apply(conf: Mapping[str, object], changes: Mapping[str, str | None]) -> dict[str, object]:
    out = {k: v for k, v in conf.items()}
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _attempt(conf, version, deployment) -> MemoryConfigError | None:
    try:
        derive_taskmanager_memory(conf, version, deployment=deployment)
        return None
    except MemoryConfigError as e:
        return e


def _diff(original: Mapping[str, object], final: Mapping[str, object]) -> Changes:
    changes: Changes = {}
    for key in set(original) | set(final):
        before = _clean(original.get(key))
        after = _clean(final.get(key))
        if before != after:
            changes[key] = None if after is None else str(final[key])
    return dict(sorted(changes.items()))


def _total_option(cfg: _Config, o: _TmOptions) -> _Option | None:
    if cfg.contains(o.process):
        return o.process
    if cfg.contains(o.flink):
        return o.flink
    return None


Step = Callable[[dict], Changes]


def _repair_steps(conf, version, deployment, error: MemoryConfigError) -> tuple[list[Step], list[Step]]:
    """Candidate changes, mildest first, split into mild ones and those that override what the user sized
    deliberately; each is computed against the configuration as repaired so far."""
    o = _tm_options(_version(version))

    legacy_heap_keys = [opt.key for opt in (o.legacy_heap, o.legacy_heap_mb) if opt is not None]

    def cfg_of(c) -> _Config:
        try:
            cfg, _ = _tm_config(c, version, deployment, [])
        except MemoryConfigError:  # an unusable legacy heap value: the first step removes it
            cfg = _Config(c, [])
        return cfg

    def unusable_legacy_heap(c):
        try:
            _tm_config(c, version, deployment, [])
        except MemoryConfigError:
            return {k: None for k in legacy_heap_keys if k in c}
        return {}

    def remove(opt: _Option | None, only_if: Callable[[_Config], bool] = lambda cfg: True):
        def step(c):
            cfg = cfg_of(c)
            if opt is None or not cfg.contains(opt) or not only_if(cfg):
                return {}
            return {k: None for k in (opt.key, *opt.deprecated) if k in c}
        return step

    def to_default(opt: _Option, above: bool = True):
        """Back to the default when set above it (or unparseable / out of range)."""
        def step(c):
            cfg = cfg_of(c)
            if not cfg.contains(opt):
                return {}
            try:
                value = cfg.fraction(opt) if opt.kind == "fraction" else cfg.size(opt)
                bad = opt.kind == "fraction" and not 0 <= value < 1
            except MemoryConfigError:
                bad, value = True, None
            if not bad and above and value <= (_to_float32(opt.default) if opt.kind == "fraction" else opt.default):
                return {}
            changes = {k: None for k in opt.deprecated if k in c}
            changes[opt.key] = None
            return changes
        return step

    def has_total(cfg):
        return cfg.contains(o.process) or cfg.contains(o.flink)

    def max_to_min(min_opt: _Option, max_opt: _Option):
        def step(c):
            cfg = cfg_of(c)
            try:
                low, high = cfg.size(min_opt), cfg.size(max_opt)
            except MemoryConfigError:
                return {}
            return {max_opt.key: _size_value(low)} if low > high else {}
        return step

    def remove_invalid(c):
        cfg = cfg_of(c)
        out: Changes = {}
        for opt in (o.process, o.flink, o.framework_heap, o.task_heap, o.framework_off_heap, o.task_off_heap,
                    o.managed_size, o.network_min, o.network_max, o.metaspace, o.overhead_min, o.overhead_max,
                    o.segment_size, o.managed_fraction, o.network_fraction, o.overhead_fraction, o.num_buffers,
                    o.legacy_heap, o.legacy_heap_mb):
            if opt is None or not cfg.contains(opt):
                continue
            try:
                {"size": cfg.size, "fraction": cfg.fraction, "int": cfg.integer}[opt.kind](opt)
            except MemoryConfigError:
                if opt is o.process or opt is o.flink:
                    continue  # the user's total stays; it is handled by the no-size step if unusable
                out[cfg.source_key(opt)] = None
        if cfg.contains(o.segment_size):
            try:
                page = cfg.size(o.segment_size)
                if page < 4096 or page & (page - 1):
                    out[cfg.source_key(o.segment_size)] = None
            except MemoryConfigError:
                pass
        return out

    def set_total(c):
        cfg = cfg_of(c)
        if has_total(cfg) or (cfg.contains(o.task_heap) and cfg.contains(o.managed_size)):
            return {}
        return {o.process.key: DISTRO_PROCESS_SIZE}

    def unparseable_total(c):
        cfg = cfg_of(c)
        for opt in (o.process, o.flink):
            try:
                cfg.size(opt) if cfg.contains(opt) else None
            except MemoryConfigError:
                return {cfg.source_key(opt): None}
        return {}

    def both_totals(c):
        """process.size and flink.size (or the legacy heap standing in for it) disagree: the process size,
        the container, wins."""
        cfg = cfg_of(c)
        if cfg.contains(o.process) and cfg.contains(o.flink):
            return {k: None for k in (o.flink.key, *legacy_heap_keys) if k in c}
        return {}

    def scale_managed(c):
        """Shrink the managed fraction (2 decimals) to what is left once everything else is placed, preferring
        a fraction that still leaves a usable task heap (Flink itself accepts a task heap of 0 bytes)."""
        cfg = cfg_of(c)
        if cfg.contains(o.managed_size) or not has_total(cfg):
            return {}
        try:
            start = int(cfg.fraction(o.managed_fraction) * 100)
        except MemoryConfigError:
            start = 40
        valid = []
        for hundredth in range(min(start, 99), -1, -1):
            value = _fraction_value(hundredth / 100)
            try:
                mem = derive_taskmanager_memory(_apply(c, {o.managed_fraction.key: value}), version,
                                                deployment=deployment)
            except MemoryConfigError:
                continue
            if mem.task_heap >= USABLE_TASK_HEAP:
                return {o.managed_fraction.key: value}
            valid.append(value)
        return {o.managed_fraction.key: valid[0] if valid else "0"}

    def shrink_managed_size(c):
        cfg = cfg_of(c)
        if not cfg.contains(o.managed_size) or not has_total(cfg):
            return {}
        keys = {k: None for k in (o.managed_size.key, *o.managed_size.deprecated) if k in c}
        return keys

    def strip_to_total(c):
        """Last resort: only the total and the defaults."""
        cfg = cfg_of(c)
        keep = {o.process.key, o.flink.key, o.legacy_heap.key if o.legacy_heap else "",
                o.legacy_heap_mb.key if o.legacy_heap_mb else ""}
        prefixes = ("taskmanager.memory.", "taskmanager.network.memory.", "taskmanager.network.numberOfBuffers")
        memory_keys = [k for k in c if k.startswith(prefixes) and k not in keep]
        out: Changes = {k: None for k in memory_keys}
        if cfg.contains(o.process) and o.flink.key in c:
            out[o.flink.key] = None
        return out

    def smallest_viable_total(c):
        """Even the defaults do not fit: the smallest process size (whole 64m steps) that does."""
        cfg = cfg_of(c)
        key = _total_option(cfg, o)
        key = key.key if key else o.process.key
        for mib in range(64, 64 * 1024 + 1, 64):
            trial = _apply(c, {key: f"{mib}m"})
            if _attempt(trial, version, deployment) is None:
                return {key: f"{mib}m"}
        return {}

    # a min raised above its max was meant: keep the min (the usual pre-1.17 "network.min > 1g" case)
    keep_network_min = error.constraint == "network-min-gt-max"
    keep_overhead_min = error.constraint == "overhead-min-gt-max"
    return [
        unusable_legacy_heap, unparseable_total, remove_invalid, set_total, both_totals,
        max_to_min(o.network_min, o.network_max), max_to_min(o.overhead_min, o.overhead_max),
        remove(o.task_heap, has_total),
        to_default(o.managed_fraction), to_default(o.network_fraction), to_default(o.overhead_fraction),
        *(() if keep_network_min else (to_default(o.network_min),)),
        to_default(o.framework_heap), to_default(o.framework_off_heap),
        *(() if keep_overhead_min else (to_default(o.overhead_min),)), to_default(o.metaspace),
        remove(o.num_buffers, lambda cfg: cfg.contains(o.task_heap)),
        shrink_managed_size, scale_managed,
    ], [
        remove(o.task_off_heap, has_total),
        strip_to_total, scale_managed, smallest_viable_total,
    ]


def suggest_fix(conf: Mapping[str, object], version: tuple[int, ...] | None = None,
                error: MemoryConfigError | None = None, *, deployment: str = "standalone") -> Changes:
    """A small set of key changes (``None`` = delete the key) after which the TaskManager starts.

    The user's ``taskmanager.memory.process.size`` (or ``flink.size``) is kept whenever the model allows it;
    only when even Flink's defaults do not fit into it is the total raised, to the smallest size in 64m steps.
    Candidate repairs are tried mildest first (drop an explicit task heap, fractions back to their defaults,
    oversized fixed parts back to defaults, a scaled-down managed fraction, ...) until the model passes with at
    least USABLE_TASK_HEAP of task heap (Flink itself would start with less, down to 0, which then fails at the
    first allocation); the user's task off-heap budget is only dropped, and the memory settings only stripped,
    when nothing milder starts at all. Every repair that turns out unnecessary is dropped again at the end.
    """
    if error is None:
        error = _attempt(conf, version, deployment)
        if error is None:
            return {}
    mild, drastic = _repair_steps(conf, version, deployment, error)

    def quality(c) -> int:
        """0 invalid, 1 starts, 2 starts with a usable task heap."""
        try:
            mem = derive_taskmanager_memory(c, version, deployment=deployment)
        except MemoryConfigError:
            return 0
        return 2 if mem.task_heap >= USABLE_TASK_HEAP else 1

    current: dict[str, object] = dict(conf)
    applied: list[Changes] = []
    first_valid: tuple[dict, list[Changes]] | None = None
    goal = 0
    for step in mild + drastic:
        if step is drastic[0] and first_valid is not None:
            break  # the configuration starts already; no overriding deliberate sizes just for a bigger task heap
        changes = step(current)
        if not changes:
            continue
        current = _apply(current, changes)
        applied.append(changes)
        goal = quality(current)
        if goal == 2:
            break
        if goal == 1 and first_valid is None:
            first_valid = (current, list(applied))
    if goal < 2:
        if first_valid is None:
            raise MemoryConfigError(f"no repair found for: {error.flink_message}", error.constraint, error.keys)
        (current, applied), goal = first_valid, 1
    # drop repairs the result does not need (latest first: the drastic ones come last)
    for i in range(len(applied) - 1, -1, -1):
        trial_steps = applied[:i] + applied[i + 1:]
        trial = dict(conf)
        for changes in trial_steps:
            trial = _apply(trial, changes)
        if quality(trial) >= goal:
            applied = trial_steps
            current = trial
    return _diff(conf, current)


_POOL_ALIASES = {
    "task_heap": "task_heap", "task-heap": "task_heap", "heap": "task_heap", "task.heap": "task_heap",
    "task_off_heap": "task_off_heap", "task-off-heap": "task_off_heap", "task.off-heap": "task_off_heap",
    "off-heap": "task_off_heap", "direct": "task_off_heap",
    "metaspace": "metaspace", "jvm-metaspace": "metaspace",
    "network": "network", "managed": "managed",
    "overhead": "overhead", "jvm-overhead": "overhead",
}


def _total_flink_size(conf, version, deployment) -> int | None:
    """Total Flink memory of a configuration with process.size or flink.size, whatever the managed fraction."""
    try:
        cfg, o = _tm_config(conf, version, deployment, [])
        if cfg.contains(o.flink):
            return cfg.size(o.flink)
        process = cfg.size(o.process)
        metaspace, overhead = _TmDerivation(cfg, o).jvm_from_total_process(process)
        return process - metaspace - overhead
    except MemoryConfigError:
        return None


def _grow_target(old: int, factor_or_bytes) -> int:
    if isinstance(factor_or_bytes, bool):
        raise TypeError("factor_or_bytes must be a float factor, an int byte count or a size string")
    if isinstance(factor_or_bytes, float):
        if factor_or_bytes <= 1:
            raise ValueError(f"growth factor must be > 1, got {factor_or_bytes}")
        if old == 0:
            raise ValueError("the pool is 0 bytes; give the amount to add (bytes or a size like '256m')")
        return int(old * factor_or_bytes)
    amount = factor_or_bytes if isinstance(factor_or_bytes, int) else parse_memory_size(factor_or_bytes)
    if amount is None or amount <= 0:
        raise ValueError(f"cannot grow by {factor_or_bytes!r}")
    return old + amount


GROW_SLACK = 64 << 10  # a grown pool may fall short of the exact target by this much, see _whole_mebibytes


def _whole_mebibytes(num_bytes: int) -> int:
    """``384m`` rather than ``402653186b``: Flink's float fractions leave a few stray bytes (128m of network is
    134217730 bytes), so round to the nearest mebibyte when that is within GROW_SLACK, else up."""
    if num_bytes < MIB:
        return num_bytes
    nearest = round(num_bytes / MIB) * MIB
    return nearest if abs(nearest - num_bytes) <= GROW_SLACK else -(-num_bytes // MIB) * MIB


def grow_pool(conf: Mapping[str, object], version: tuple[int, ...] | None = None, pool: str = "task_heap",
              factor_or_bytes: float | int | str = 1.5, *, deployment: str = "standalone",
              protect_other_pools: bool = True) -> Changes:
    """Key changes that grow one TaskManager pool while the model stays valid (the OOM fix).

    ``pool``: ``task_heap`` ("Java heap space"), ``task_off_heap`` ("Direct buffer memory"), ``metaspace``,
    ``network`` ("Insufficient number of network buffers"), ``managed`` or ``overhead``.
    ``factor_or_bytes``: a float multiplies the pool (1.5 = +50 %); an int (bytes) or a size string is added.

    The pool gets its own key: ``task.off-heap.size``, ``jvm-metaspace.size``, ``network.min`` (and ``.max`` when
    below), ``jvm-overhead.min`` (and ``.max``), ``managed.fraction`` (``managed.size`` when that was set or no
    total is); the task heap stays derived unless it was set. When the user fixed the total (``process.size``
    and/or ``flink.size``, or the legacy heap standing for one), the total grows too: by the same amount when that
    is enough, else by the smallest whole number of mebibytes that keeps every other pool at least as large as
    before (fraction-based pools and the JVM overhead take their share of any growth; ``protect_other_pools=False``
    drops that condition). Grown sizes are whole mebibytes, which may leave the pool up to GROW_SLACK short of the
    exact sum. An invalid configuration is repaired first with :func:`suggest_fix`, whose changes (``None`` =
    delete the key) are part of the result.
    """
    canonical = _POOL_ALIASES.get(pool.strip().lower().replace(" ", "_"), pool)
    if canonical not in ("task_heap", "task_off_heap", "metaspace", "network", "managed", "overhead"):
        raise ValueError(f"unknown pool {pool!r}")
    pre = {}
    error = _attempt(conf, version, deployment)
    if error is not None:
        pre = suggest_fix(conf, version, error, deployment=deployment)
    base = _apply(conf, pre)
    before = derive_taskmanager_memory(base, version, deployment=deployment)
    old = getattr(before, canonical)
    target = _whole_mebibytes(_grow_target(old, factor_or_bytes))
    delta = target - old

    cfg, o = _tm_config(base, version, deployment, [])
    own: Changes = {}
    if canonical == "task_heap":
        if cfg.contains(o.task_heap):
            own[o.task_heap.key] = _size_value(target)
    elif canonical == "task_off_heap":
        own[o.task_off_heap.key] = _size_value(target)
    elif canonical == "metaspace":
        own[o.metaspace.key] = _size_value(target)
    elif canonical == "managed" and (cfg.contains(o.managed_size) or not (cfg.contains(o.process)
                                                                          or cfg.contains(o.flink))):
        own[o.managed_size.key] = _size_value(target)
    elif canonical == "managed":
        pass  # a fraction of flink memory: raised per candidate total below (an explicit size could switch
        # Flink to the fine-grained derivation when task.heap.size is set too)
    elif canonical == "network":
        own[o.network_min.key] = _size_value(target)
        if cfg.size(o.network_max) < target:
            # a remainder network (task heap sized explicitly) needs room above the min, or no total would fit
            remainder = before.derivation.get("network", "").startswith("rest of flink")
            own[o.network_max.key] = _size_value(2 * target if remainder else target)
    elif canonical == "overhead":
        own[o.overhead_min.key] = _size_value(target)
        if cfg.size(o.overhead_max) < target:
            remainder = before.derivation.get("overhead", "").startswith("process - flink - metaspace")
            own[o.overhead_max.key] = _size_value(2 * target if remainder else target)

    # which totals grow: the ones the user fixed (legacy heap counts as the key it maps to)
    totals = [opt for opt in (o.process, o.flink) if cfg.contains(opt)]
    inside_flink = canonical not in ("metaspace", "overhead")
    if not inside_flink and o.process not in totals:
        totals = []  # flink.size alone: metaspace/overhead come on top of it

    def candidate(extra: int) -> Changes:
        changes = dict(own)
        for opt in totals:
            if opt is o.flink and not inside_flink:
                continue
            changes[opt.key] = _size_value(cfg.size(opt) + extra)
        if canonical == "managed" and o.managed_size.key not in own:
            flink = _total_flink_size(_apply(base, changes), version, deployment)
            if flink is None:
                return changes
            fraction = math.ceil(target / flink * 1000) / 1000
            while fraction < 1 and _multiply(flink, _to_float32(fraction)) < target:
                fraction += 0.001  # Flink multiplies by the float nearest to it, which may fall short
            changes[o.managed_fraction.key] = _fraction_value(min(fraction, 0.999))
        return changes

    def fits(extra: int) -> bool:
        try:
            after = derive_taskmanager_memory(_apply(base, candidate(extra)), version, deployment=deployment)
        except MemoryConfigError:
            return False
        if getattr(after, canonical) < target:
            return False
        return not protect_other_pools or all(getattr(after, p) >= getattr(before, p) for p in POOLS)

    if not totals:
        if not fits(0):
            raise ValueError(f"growing {canonical} by {delta} bytes does not leave a valid configuration")
        return _diff(conf, _apply(base, candidate(0)))
    # Whole mebibytes of extra total. Validity is not monotone in the total (with an explicit task heap the network
    # memory is the remainder and must stay within [min, max]), so scan coarsely, then finely below the first hit.
    first = -(-delta // MIB)
    limit = first * 8 + 8192
    coarse = max(1, first // 32)
    hit = next((m for m in range(first, limit + 1, coarse) if fits(m * MIB)), None)
    if hit is None and coarse > 1:
        hit = next((m for m in range(first, limit + 1) if fits(m * MIB)), None)
    if hit is None:
        raise ValueError(f"no total size keeps the model valid while growing {canonical} by {delta} bytes")
    hit = next(m for m in range(max(first, hit - coarse + 1), hit + 1) if fits(m * MIB))
    extra = hit * MIB
    return _diff(conf, _apply(base, candidate(extra)))


# ---------------------------------------------------------------------------------------------------------------


def summarize(mem: TaskManagerMemory | JobManagerMemory) -> str:
    """A few lines of human text over a breakdown."""
    f = format_size
    if isinstance(mem, JobManagerMemory):
        text = (f"JobManager process {f(mem.process)} = flink {f(mem.flink)} (heap {f(mem.heap)} + off-heap "
                f"{f(mem.off_heap)}) + metaspace {f(mem.metaspace)} + overhead {f(mem.overhead)}")
    else:
        text = (f"TaskManager process {f(mem.process)} = flink {f(mem.flink)} + metaspace {f(mem.metaspace)} + "
                f"overhead {f(mem.overhead)}\n"
                f"  JVM heap {f(mem.jvm_heap)} (-Xmx): framework {f(mem.framework_heap)} + task {f(mem.task_heap)}\n"
                f"  managed {f(mem.managed)} (RocksDB / batch operators, off-heap)\n"
                f"  JVM direct {f(mem.direct)} (-XX:MaxDirectMemorySize): framework {f(mem.framework_off_heap)} + "
                f"task {f(mem.task_off_heap)} + network {f(mem.network)}\n"
                f"  metaspace {f(mem.metaspace)} (-XX:MaxMetaspaceSize)")
    for note in mem.notes:
        text += f"\n  note: {note}"
    return text
