"""Java value semantics, the memory options of each Flink version and the configuration they are read from."""
from __future__ import annotations

import decimal
import math
import re
import struct
from dataclasses import dataclass
from typing import Iterable, Mapping
from flink_runbooks.vocabulary.units import format_size, parse_memory_size
from flink_runbooks.vocabulary.versions import FlinkVersion


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


def _version(version) -> FlinkVersion:
    parsed = FlinkVersion.parse(version)
    if parsed is None:
        return FlinkVersion(DEFAULT_VERSION)
    if parsed < (1, 10):
        raise ValueError(f"Flink {parsed} predates the FLIP-49 memory model (1.10)")
    return parsed


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
