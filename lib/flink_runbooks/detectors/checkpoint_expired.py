"""``Checkpoint N of job X expired before completing``: why checkpoints outlived their timeout."""
from __future__ import annotations

import re
import statistics

from flink_runbooks.evidence.checkpoint_analysis import CompletedStats, ceil_duration_ms, completed_stats, failovers
from flink_runbooks.evidence.episodes import find_with_history
from flink_runbooks.evidence.checkpoints import CheckpointAttempt, checkpoint_history
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.parse.timestamps import span_ms
from flink_runbooks.vocabulary.units import format_duration, human_duration, human_size
from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.vocabulary.lifecycle import TOLERABLE_FAILURES_EXCEEDED
from flink_runbooks.vocabulary.wordings import Wording

TIMEOUT_KEY = "execution.checkpointing.timeout"
DEFAULT_TIMEOUT_MS = 600_000
TOLERABLE_KEY = "execution.checkpointing.tolerable-failed-checkpoints"
TOLERABLE = 3  # rides out an isolated expiry, still fails on an outage (a production deployment settled on 3)

EXPIRED_TEXT = re.compile(r"[Cc]heckpoint expired before completing|expired before completing")
LATE_ACK = re.compile(
    r"Received late message for now expired checkpoint attempt (?P<id>\d+) from(?: task)? (?P<task>\S+) of job "
    r"(?P<job>[0-9a-f]{32})(?: at (?P<where>.+?))?\.?$")
TM_STALL = re.compile(
    r"[Hh]eartbeat of TaskManager with id (?P<tm>\S+?) timed out|TaskManager with id (?P<tm2>\S+?) is no longer reachable")
REGISTERED_TM = re.compile(r"Registering TaskManager with ResourceID (?P<tm>\S+)")

# Thresholds of the classification (named so the runbook can show them).
NEAR_TIMEOUT = 0.5  # completed checkpoints that need half the timeout or more leave no headroom
GROWING = 2.0  # last third over first third of completed checkpoint sizes/durations
LARGE_STATE = 1 << 30  # 1 GiB per checkpoint


class CheckpointExpired(Detector):
    slug = "checkpoint-expired"
    title = "Checkpoint expired before completing"
    category = "checkpointing"
    meaning = ("A checkpoint did not complete within execution.checkpointing.timeout, so the JobManager aborted it; "
               "the job keeps running until expirations exhaust the tolerable-failure threshold.")
    exception_classes = ("org.apache.flink.runtime.checkpoint.CheckpointException",)
    versions = "1.x, 2.x (expirations count against tolerable-failed-checkpoints since FLINK-17351)"
    layer = 0
    collect_next = "the checkpoint timeout, the checkpoint history and the back pressure at the time"
    config_keys = (
        "execution.checkpointing.timeout",
        "execution.checkpointing.interval",
        "execution.checkpointing.min-pause",
        "execution.checkpointing.unaligned.enabled",
        "execution.checkpointing.aligned-checkpoint-timeout",
        "execution.checkpointing.tolerable-failed-checkpoints",
        "execution.checkpointing.incremental",
        "state.backend.type",
    )
    signatures = (
        r"expired before completing",
        r"Received late message for now expired checkpoint",
        r"[Hh]eartbeat of TaskManager with id \S+ timed out",
        r"TaskManager with id \S+ is no longer reachable",
        r"Registering TaskManager with ResourceID",
    )
    root_causes = (
        RootCause("backpressure-alignment",
                  "Aligned checkpoint barriers queued behind backpressured buffers, so checkpoints could not finish "
                  "in time.",
                  "Aligned checkpoints (unaligned not enabled); no or few checkpoints complete and their durations "
                  "grow while the state size does not; late acknowledgements from downstream tasks.",
                  patches=("flink:execution.checkpointing.aligned-checkpoint-timeout",
                           "flink:execution.checkpointing.min-pause", "flink:execution.checkpointing.timeout",
                           "flink:execution.checkpointing.tolerable-failed-checkpoints",
                           "flink:execution.checkpointing.unaligned.enabled",
                           "flink:taskmanager.network.memory.buffer-debloat.enabled",
                           "ops:find the backpressured operator", "ops:upgrade for unaligned checkpoints")),
        RootCause("slow-state-upload",
                  "The state grew too large (or the storage too slow) to be written within the timeout.",
                  "Completed checkpoint sizes grow (or exceed 1 GiB) and durations grow with them; long asynchronous "
                  "durations; expirations even with unaligned checkpoints.",
                  patches=("flink:execution.checkpointing.incremental", "flink:execution.checkpointing.min-pause",
                           "flink:execution.checkpointing.timeout",
                           "flink:execution.checkpointing.tolerable-failed-checkpoints",
                           "ops:checkpoint storage throughput")),
        RootCause("timeout-too-short",
                  "The timeout is shorter than what healthy checkpoints of this job need.",
                  "Completed checkpoints take half the timeout or more with stable size and duration; expirations "
                  "alternate with completions.",
                  patches=("flink:execution.checkpointing.min-pause", "flink:execution.checkpointing.timeout")),
        RootCause("tm-stall",
                  "A TaskManager stalled (GC pause, overload, lost) and never acknowledged the checkpoint.",
                  "A TaskManager heartbeat timeout or unreachable TaskManager while the expired checkpoint was "
                  "pending, or late acknowledgements of the expired checkpoint all from one of several TaskManagers.",
                  patches=("flink:execution.checkpointing.timeout", "ops:stalled TaskManager")),
    )

    wordings = (
        Wording("checkpoint-expired", r"Checkpoint \d+ of job [0-9a-f]+ expired before completing",
                "1.3 – 2.x", "CheckpointCoordinator / CheckpointCanceller (\"Checkpoint {} of job {} expired before completing.\")",
                "Checkpoint 7 of job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c expired before completing."),
        Wording("checkpoint-expired", r"Checkpoint expired before completing\.",
                "1.9 – 2.x", "CheckpointFailureReason.CHECKPOINT_EXPIRED",
                "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing."),
    )

    templates = {
        "head": "{count} checkpoint(s){ids} expired after the {timeout} timeout; {completed} completed. ",
        "ids": " ({ids})",
        "why": "Why: {cause} Evidence: {why}.",
        "failed over": " Consecutive expirations exceeded tolerable-failed-checkpoints ({tolerable}) and the job "
                       "failed over {failovers} time(s).",
        "tolerated": " The job kept running: tolerable-failed-checkpoints={tolerable} let the expirations pass; it "
                     "fails over once more of them in a row exceed it.",
        "counts against": " No failover shows in these logs, but each expiration counts against "
                          "tolerable-failed-checkpoints ({tolerable}): unless the job's code raises it, the job fails "
                          "over; whether it kept running is unknown.",
        "tolerable unset": "unset, so 0",
        # what the verdict rests on ("Evidence: ..." in the summary, "why" in the details)
        "stopped heartbeats": "TaskManager {tms} stopped answering heartbeats while a checkpoint was pending",
        "one late taskmanager": "all {late} late acknowledgement(s) of the expired checkpoint came from TaskManager "
                                "{tm}, one of {tms}, while the other TaskManagers had acknowledged in time",
        "size grew": "checkpoint size grew {growth:g}x to {size}",
        "large state": "checkpoints of up to {size} take up to {duration}",
        "durations grew": "checkpoint durations grew {growth:g}x while the size stayed flat, with aligned checkpoints",
        "near timeout": "completed checkpoints already need {p90} (p90) of the {timeout} timeout",
        "unaligned expire": "checkpoints expire although barriers overtake buffers (unaligned checkpoints)",
        "aligned wait": "completed checkpoints take {median} (median) but others never finish: with aligned "
                        "checkpoints the barriers wait behind backpressured buffers",
        "none completed": "no checkpoint completed within {timeout}, with aligned checkpoints",
        # evidence notes
        "expired note": "checkpoint {id} expired ({count} expiration(s) in these logs)",
        "bare note": "a checkpoint expired ({count} such record(s); the excerpt names no checkpoint id)",
        "completed note": "checkpoint {id}: {done}",
        "last completed note": "last completed checkpoint before the expiry, {id}: {done}",
        "done": "{size}in {duration}",
        "stall note": "TaskManager {tm} stalled while the checkpoint was pending",
        "late note": "task {task} acknowledged checkpoint {id} only after it had expired",
        "failover note": "the expirations exhausted the tolerable-failure threshold: the job failed over",
        "latest note": "latest expiration: checkpoint {id}",
        # patches
        "timeout from durations": "Completed checkpoints took up to {longest} (p90 {p90}) and the expired ones more "
                                  "than {timeout}: leave headroom above both.",
        "default timeout": "No checkpoint completed, so there is no duration to size the timeout from; go back to "
                           "Flink's default while the cause below is fixed.",
        "longer timeout": "No checkpoint completed even with the default timeout: give them longer while the cause is "
                          "fixed.",
        "bridges backpressure": " A longer timeout only bridges the backpressure; unaligned checkpoints remove the "
                                "wait.",
        "enable unaligned": "Barriers overtake the buffered records instead of waiting for them, so checkpoint time "
                            "no longer grows with backpressure (requires max-concurrent-checkpoints 1; in-flight data "
                            "is stored with the checkpoint).",
        "aligned timeout": "Start aligned and switch to unaligned only when alignment takes longer than 30 s, which "
                           "keeps checkpoints small while the pipeline is healthy.",
        "debloat": "Buffer debloating keeps only about 1 s of in-flight data per channel, so barriers (and unaligned "
                   "checkpoint state) have less to get through.",
        "upgrade for unaligned": "Unaligned checkpoints exist since Flink 1.11; on this version reduce the "
                                 "backpressure instead.",
        "find the backpressured operator": "Checkpoint time under backpressure is set by the slowest operator: find "
                                           "it (Web UI BackPressure tab, busy time 100 %) and scale it out or fix "
                                           "what it waits on.",
        "incremental": "With RocksDB upload only the files that changed since the last checkpoint instead of the full "
                       "state every time.",
        "storage throughput": "Check the per-subtask async duration and checkpointed size in the Checkpoint History "
                              "tab; a slow or throttled store (S3 SlowDown, HDFS pipeline) or one large subtask (key "
                              "skew) shows there.",
        "stalled taskmanager": "Find why the TaskManager stopped responding while the checkpoint was pending: GC "
                               "pauses (enable GC logs), CPU starvation, a blocked task thread (thread dump), or the "
                               "container being killed.",
        "min pause": "Checkpoints that take about as long as the interval run back to back; a pause guarantees the "
                     "job progress between them.",
        "tolerable": "Let an isolated expiration pass instead of failing the job over (consecutive ones still fail "
                     "it).",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        history = checkpoint_history(incident)
        expired = [a for a in history if a.outcome == "expired"]
        bare = [ev for ev in incident.events if EXPIRED_TEXT.search(ev.text) and not TOLERABLE_FAILURES_EXCEEDED.search(ev.text)]
        if not expired and not bare:
            return []
        job = _main_job(expired)
        expired = [a for a in expired if a.job == job] if job else expired
        stats = completed_stats(history, job)
        timeout_ms, timeout_source = self._timeout(incident, expired)
        late = [(ev, m) for ev, m in incident.find(LATE_ACK) if job is None or m["job"] == job]
        stalls = _stalls_during(incident, expired)
        laggard = _single_late_taskmanager(incident, late)
        unaligned = incident.config.get_bool("execution.checkpointing.unaligned.enabled")
        thresholds = [ev for ev, m in find_with_history(incident, TOLERABLE_FAILURES_EXCEEDED)
                      if not m["reason"] or "expired" in m["reason"]]
        failed_over = bool(thresholds) and _expired_before(expired, bare, thresholds[0])

        cause, why = self._cause(stats, timeout_ms, expired, stalls, laggard, unaligned)
        evidence, notes = self._evidence(expired, bare, stats, history, late, stalls, thresholds if failed_over else [])
        details = {
            "expired_checkpoints": [a.checkpoint_id for a in expired] or "ids not in the excerpt",
            "expired_count": len(expired) or len(bare),
            "completed_count": stats.count,
            "longest_expired_streak": _longest_streak(history, job),
            "timeout": f"{format_duration(timeout_ms)} ({timeout_source})",
            "completed_duration_median": human_duration(stats.median_ms) if stats.durations_ms else None,
            "completed_duration_p90": human_duration(stats.p90_ms) if stats.durations_ms else None,
            "completed_duration_max": human_duration(stats.max_ms) if stats.durations_ms else None,
            "duration_growth": stats.duration_growth,
            "size_first": human_size(stats.sizes_bytes[0]) if stats.sizes_bytes else None,
            "size_last": human_size(stats.sizes_bytes[-1]) if stats.sizes_bytes else None,
            "size_growth": stats.size_growth,
            "unaligned_checkpoints": {True: "enabled", False: "disabled"}.get(unaligned, "not set (disabled)"),
            "late_acknowledgements": len(late),
            "late_tasks": sorted({m["task"] for _, m in late})[:10],
            "taskmanager_stalls": sorted({m["tm"] or m["tm2"] for _, m in stalls}),
            "failovers": failovers(thresholds) if failed_over else 0,
            "why": why,
        }
        details = {k: v for k, v in details.items() if v is not None}
        summary = self._summary(cause, why, expired, bare, stats, timeout_ms, failed_over, thresholds, incident)
        return [self.finding(
            cause, summary, evidence,
            confidence=0.85 if expired and (stats.count or cause in ("tm-stall", "backpressure-alignment")) else 0.6,
            patches=self._patches(incident, cause, stats, timeout_ms, failed_over, unaligned),
            severity="failure" if failed_over else "warning",
            notes=notes,
            details=details,
        )]

    # -- judgement

    @staticmethod
    def _timeout(incident: Incident, expired: list[CheckpointAttempt]) -> tuple[int, str]:
        configured = incident.config.lookup(TIMEOUT_KEY)
        ms = incident.config.get_duration_ms(TIMEOUT_KEY)
        if configured and ms:
            return ms, f"configured, {configured.source}"
        # The time from trigger to expiry is the timeout the job really used (it may be set in job code).
        spans = [_span_ms(a) for a in expired]
        spans = [s for s in spans if s]
        if spans:
            return int(statistics.median(spans)), "observed from trigger to expiry"
        return DEFAULT_TIMEOUT_MS, "Flink's default"

    def _cause(self, stats: CompletedStats, timeout_ms: int, expired: list[CheckpointAttempt], stalls, laggard,
               unaligned: bool | None) -> tuple[str, str]:
        if stalls:
            tms = ", ".join(sorted({m["tm"] or m["tm2"] for _, m in stalls}))
            return "tm-stall", self.say("stopped heartbeats", tms=tms)
        if laggard:
            tm, n_late, n_tms = laggard
            return "tm-stall", self.say("one late taskmanager", late=n_late, tm=tm, tms=n_tms)
        size_growth = stats.size_growth or 0
        biggest = max(stats.sizes_bytes) if stats.sizes_bytes else 0
        if (size_growth >= GROWING and (stats.duration_growth or 0) >= 1.5) or \
                (biggest >= LARGE_STATE and (stats.max_ms or 0) >= NEAR_TIMEOUT * timeout_ms):
            return "slow-state-upload", (
                self.say("size grew", growth=size_growth, size=human_size(stats.sizes_bytes[-1]))
                if size_growth >= GROWING else
                self.say("large state", size=human_size(biggest), duration=human_duration(stats.max_ms)))
        if stats.durations_ms and (stats.duration_growth or 0) >= GROWING and size_growth < 1.5 and not unaligned:
            return "backpressure-alignment", self.say("durations grew", growth=stats.duration_growth)
        if stats.durations_ms and (stats.p90_ms or 0) >= NEAR_TIMEOUT * timeout_ms:
            return "timeout-too-short", self.say("near timeout", p90=human_duration(stats.p90_ms),
                                                 timeout=format_duration(timeout_ms))
        if unaligned:
            return "slow-state-upload", self.say("unaligned expire")
        if stats.durations_ms:
            return "backpressure-alignment", self.say("aligned wait", median=human_duration(stats.median_ms))
        return "backpressure-alignment", self.say("none completed", timeout=format_duration(timeout_ms))

    # -- presentation

    def _evidence(self, expired, bare, stats, history, late, stalls, thresholds):
        evs, notes, add = evidence_trail()

        if expired:
            first = expired[0]
            add(_expiry_event(first), self.say("expired note", id=first.checkpoint_id, count=len(expired)))
        else:
            add(bare[0], self.say("bare note", count=len(bare)))
        first_ts = (expired[0].finished if expired else bare[0].ts) or "~"
        done = [a for a in history if a.outcome == "completed" and a.events and (a.finished or "") <= first_ts]
        if done and (stats.size_growth or 0) >= GROWING:
            add(done[0].events[-1], self.say("completed note", id=done[0].checkpoint_id,
                                             done=self._done_text(done[0])))
        if done:
            add(done[-1].events[-1], self.say("last completed note", id=done[-1].checkpoint_id,
                                              done=self._done_text(done[-1])))
        for ev, m in stalls[:1]:
            add(ev, self.say("stall note", tm=m['tm'] or m['tm2']))
        for ev, m in late[:1]:
            add(ev, self.say("late note", task=m['task'], id=m['id']))
        if thresholds:
            add(thresholds[0], self.say("failover note"))
        if len(expired) > 1:
            add(_expiry_event(expired[-1]), self.say("latest note", id=expired[-1].checkpoint_id))
        return evs, notes

    def _done_text(self, att: CheckpointAttempt) -> str:
        size = f"{human_size(att.size_bytes)} " if att.size_bytes is not None else ""
        if att.duration_ms is not None:
            return self.say("done", size=size, duration=human_duration(att.duration_ms))
        return size.strip() or "completed"

    def _summary(self, cause, why, expired, bare, stats, timeout_ms, failed_over, thresholds, incident) -> str:
        n = len(expired) or len(bare)
        ids = _id_ranges([a.checkpoint_id for a in expired])
        head = self.say("head", count=n, ids=self.say("ids", ids=ids) if ids else "",
                        timeout=format_duration(timeout_ms), completed=stats.count)
        tolerable = incident.config.get(TOLERABLE_KEY)
        shown = tolerable if tolerable is not None else self.say("tolerable unset")
        tail = (self.say("failed over", tolerable=shown, failovers=failovers(thresholds)) if failed_over else
                self.say("tolerated", tolerable=tolerable) if tolerable not in (None, "0") and stats.count
                else self.say("counts against", tolerable=shown))
        return head + self.say("why", cause=self.cause(cause).summary, why=why) + tail

    # -- patches

    def _patches(self, incident: Incident, cause: str, stats: CompletedStats, timeout_ms: int, failed_over: bool,
                 unaligned: bool | None):
        cfg = incident.config
        version = incident.version_tuple
        patches = []
        if stats.durations_ms:
            # Expired attempts needed more than the timeout, so completed ones understate the need.
            proposed = ceil_duration_ms(max(3 * stats.max_ms, 2 * timeout_ms))
            reason = self.say("timeout from durations", longest=human_duration(stats.max_ms),
                              p90=human_duration(stats.p90_ms), timeout=format_duration(timeout_ms))
        elif timeout_ms < DEFAULT_TIMEOUT_MS:
            proposed = DEFAULT_TIMEOUT_MS
            reason = self.say("default timeout")
        else:
            proposed = ceil_duration_ms(2 * timeout_ms)
            reason = self.say("longer timeout")
        if cause == "backpressure-alignment":
            reason += self.say("bridges backpressure")
        patches.append(self.flink_patch(incident, TIMEOUT_KEY, format_duration(proposed), reason))

        if cause == "backpressure-alignment":
            if version is None or version >= (1, 11):
                if not unaligned:
                    patches.append(self.flink_patch(
                        incident, "execution.checkpointing.unaligned.enabled", "true", self.say("enable unaligned")))
                if version is None or version >= (1, 14):
                    patches.append(self.flink_patch(
                        incident, "execution.checkpointing.aligned-checkpoint-timeout", "30 s",
                        self.say("aligned timeout")))
                    if not cfg.get_bool("taskmanager.network.memory.buffer-debloat.enabled"):
                        patches.append(self.flink_patch(
                            incident, "taskmanager.network.memory.buffer-debloat.enabled", "true",
                            self.say("debloat")))
            else:
                patches.append(self.ops_patch("upgrade for unaligned checkpoints", self.say("upgrade for unaligned"),
                                              urgent=False))
            patches.append(self.ops_patch(
                "find the backpressured operator", self.say("find the backpressured operator"),
                snippet="curl -s http://<jobmanager>:8081/jobs/<job-id>/vertices/<vertex-id>/backpressure"))
        if cause == "slow-state-upload":
            backend = (cfg.get("state.backend.type") or "").lower()
            if "rocksdb" in backend and not cfg.get_bool("execution.checkpointing.incremental"):
                patches.append(self.flink_patch(
                    incident, "execution.checkpointing.incremental", "true", self.say("incremental")))
            patches.append(self.ops_patch(
                "checkpoint storage throughput", self.say("storage throughput"),
                snippet="curl -s http://<jobmanager>:8081/jobs/<job-id>/checkpoints/details/<checkpoint-id>"))
        if cause == "tm-stall":
            patches.append(self.ops_patch(
                "stalled TaskManager", self.say("stalled taskmanager"),
                snippet="curl -s http://<jobmanager>:8081/taskmanagers/<tm-id>/thread-dump"))
        interval = cfg.get_duration_ms("execution.checkpointing.interval")
        min_pause = cfg.get_duration_ms("execution.checkpointing.min-pause") or 0
        if interval and cause in ("backpressure-alignment", "slow-state-upload", "timeout-too-short"):
            wanted = ceil_duration_ms(max(interval // 4, (stats.median_ms or 0) // 2))
            if wanted > min_pause:
                patches.append(self.flink_patch(
                    incident, "execution.checkpointing.min-pause", format_duration(wanted), self.say("min pause")))
        tolerable = cfg.get_int(TOLERABLE_KEY) or 0
        if failed_over and tolerable < TOLERABLE:
            patches.append(self.flink_patch(incident, TOLERABLE_KEY, str(TOLERABLE), self.say("tolerable")))
        return patches


def _main_job(expired: list[CheckpointAttempt]) -> str | None:
    jobs = [a.job for a in expired if a.job]
    return max(set(jobs), key=jobs.count) if jobs else None


def _span_ms(att: CheckpointAttempt) -> int | None:
    return span_ms(att.triggered, att.finished)


def _expiry_event(att: CheckpointAttempt) -> Event:
    return next((ev for ev in att.events if EXPIRED_TEXT.search(ev.message)), att.events[-1])


def _stalls_during(incident: Incident, expired: list[CheckpointAttempt]):
    """TaskManager heartbeat timeouts while an expired checkpoint was pending."""
    out = []
    windows = [(a.triggered, a.finished) for a in expired if a.triggered and a.finished]
    for ev, m in incident.find(TM_STALL):
        if ev.ts and any(start <= ev.ts <= end for start, end in windows):
            out.append((ev, m))
    return out


def _single_late_taskmanager(incident: Incident, late) -> tuple[str, int, int] | None:
    """(TaskManager, late acks, TaskManagers known) when every late acknowledgement came from one of several."""
    where = {(m["where"] or "").split(" @ ")[0].split(" ")[0] for _, m in late if m["where"]}
    known = {m["tm"] for _, m in incident.find(REGISTERED_TM)}
    n_tms = max(len(known), sum(1 for f in incident.inputs if f.role == "taskmanager"))
    if len(where) == 1 and n_tms >= 2:
        return next(iter(where)), len(late), n_tms
    return None


def _expired_before(expired: list[CheckpointAttempt], bare: list[Event], threshold: Event) -> bool:
    if not threshold.ts:
        return True
    stamps = [a.finished for a in expired if a.finished] + [ev.ts for ev in bare if ev.ts]
    return not stamps or min(stamps) <= threshold.ts


def _longest_streak(history: list[CheckpointAttempt], job: str | None) -> int:
    best = run = 0
    for a in history:
        if job and a.job not in (job, None):
            continue
        if a.outcome == "expired":
            run += 1
            best = max(best, run)
        elif a.outcome == "completed":
            run = 0
    return best


def _id_ranges(ids: list[int]) -> str:
    """[1, 2, 3, 7] -> "1–3, 7"."""
    if not ids:
        return ""
    ids = sorted(set(ids))
    parts, start, prev = [], ids[0], ids[0]
    for i in ids[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(f"{start}–{prev}" if prev != start else str(start))
        if i is not None:
            start = prev = i
    return ", ".join(parts[:6]) + (" …" if len(parts) > 6 else "")
