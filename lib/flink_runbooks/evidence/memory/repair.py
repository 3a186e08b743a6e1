"""Repairs: the smallest configuration change that makes a memory configuration valid, or grows one pool."""
from __future__ import annotations

import math
from typing import Callable, Mapping
from flink_runbooks.vocabulary.units import parse_memory_size
from flink_runbooks.evidence.memory.options import (DISTRO_PROCESS_SIZE, MIB, MemoryConfigError, USABLE_TASK_HEAP, _Config, _Option, _TmOptions, _clean,
    _fraction_value, _multiply, _size_value, _tm_options, _to_float32, _version)
from flink_runbooks.evidence.memory.model import POOLS, _TmDerivation, _tm_config, derive_taskmanager_memory

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
