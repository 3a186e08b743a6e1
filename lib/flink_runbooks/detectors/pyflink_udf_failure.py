"""A PyFlink job's Python function failed in its Python worker: the Python traceback inside the Java trace says why.

PyFlink runs the job's Python functions (Table API UDFs, DataStream functions) in a worker beside the TaskManager:
Beam's SDK harness in its own process (the default, ``python.execution-mode: process``), or, from 1.15, the
interpreter PEMJA embeds in the TaskManager (``thread``). The worker's failure reaches the logs as Java text
(:mod:`flink_runbooks.evidence.python_udf` reads it), and the causes are told apart by the Python exception and where
it was raised:

- ``user-function-raised``: the job's own Python code raised (the deepest frame that is the job's file, not
  PyFlink's, Beam's, a library's or the standard library's): the file, line, function, code line and exception are
  named; restarting replays the same input into the same code;
- ``module-missing-on-workers``: ``ModuleNotFoundError``/``ImportError`` for a module the workers do not have (the
  client had it: a module next to the job or installed where it was submitted, not shipped with ``python.files``,
  ``python.requirements`` or ``python.archives``); often raised while cloudpickle loads the function;
- ``interpreter-without-pyflink``: the module missing is PyFlink's own or one of its dependencies (pyflink, pemja,
  apache_beam, cloudpickle...): the interpreter the workers run is not one apache-flink is installed in (in thread
  mode, the interpreter embedded in the TaskManager does not see a virtualenv's packages);
- ``python-interpreter-missing``: ``python.executable`` names a program the TaskManager host does not have
  (``Cannot run program "...": error=2, No such file or directory``) or cannot run (``error=13, Permission denied``).

Anything else (Flink's message without the traceback, a cut-off excerpt, a worker process that died) is
``undetermined`` with what to collect.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.faults import task_name
from flink_runbooks.evidence.python_udf import PythonFailure, python_failures
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "pyflink-udf-failure"
# Beam's FnApiControlClient: the worker's answer to an instruction was an error (its traceback follows)
SDK_HARNESS_ERROR = re.compile(r"Error received from SDK harness for instruction (?P<instruction>[\w-]+):")
PEMJA_ERROR = re.compile(r"(?:pemja\.core\.)?PythonException: <class '(?P<cls>[\w.]+)'>")
# ProcessBuilder#start, from PythonEnvironmentManagerUtils (the worker's runner script is found with the interpreter)
CANNOT_RUN = re.compile(r"Cannot run program \"(?P<program>[^\"]+)\"(?: \(in directory \"[^\"]*\"\))?: "
                        r"error=(?P<errno>\d+), (?P<reason>No such file or directory|Permission denied)")
# AbstractPythonEnvironmentManager (INFO), as each Python operator opens
INTERPRETER_PATH = re.compile(r"Python interpreter path: (?P<path>\S+)")
TASK_FAILED = re.compile(r"switched from \w+ to FAILED")
# The Python worker logging its own failure (the logger is its Python file: beam_sdk_worker_main.py, sdk_worker.py)
WORKER_LOGGER = re.compile(r"(?:apache_beam|pyflink)/.*\.py(?::\d+)?$")
WORKER_FRAME = re.compile(r'^File "[^"]*(?:apache_beam/runners/worker/|pyflink/fn_execution/)')
# The worker's connection ended without an answer (recorded: the worker process killed while a bundle was open):
# gRPC's cancellation under BeamPythonFunctionRunner's "Failed to close remote bundle", or Beam's own words
WORKER_GONE = re.compile(r"CANCELLED: client cancelled|SDK harness closed connection|"
                         r"FnApiControlClient closed, clearing outstanding requests")
REMOTE_BUNDLE = re.compile(r"Failed to (?:close|start) remote bundle")
# Beam's ProcessManager: the worker process ended while the TaskManager still needed it
PROCESS_DIED = re.compile(r"Process died with exit code (?P<code>-?\d+)")
# The packages apache-flink installs for its Python worker (its Requires-Dist in 1.20.3 and 2.3.0): missing one means
# the interpreter is not one PyFlink is installed in.
PYFLINK_OWN_MODULES = ("pyflink", "pemja", "apache_beam", "cloudpickle", "py4j", "google", "pyarrow", "pandas", "numpy",
                       "fastavro", "avro", "dateutil", "pytz", "requests", "httplib2", "ruamel")
_PYTHON_TASK_FRAME = r"\([\w.<>-]+\.py:\d+\)"

_HANDLE = "code:handle the failing input in the Python function"
_COLLECT = "ops:collect the Python traceback"
_NEXT = ("the whole trace of the failure in the TaskManager log, with the Python traceback under Flink's message "
         "(`grep -n -A60 -E 'Error received from SDK harness|pemja.core.PythonException|Traceback' taskmanager*.log`), "
         "the worker's boot log (flink-python-udf-boot.log under the TaskManager's temporary directories) and the "
         "python.* settings of the job.")


class PyflinkUdfFailure(Detector):
    slug = SLUG
    title = "PyFlink Python function failed in its worker"
    category = "job-code"
    meaning = ("A Python function of a PyFlink job failed in the Python worker beside the TaskManager: the job's own "
               "code raised, a module is missing on the workers, or the interpreter the workers run is missing or "
               "lacks PyFlink.")
    versions = ("1.10 – 2.x (process mode, Beam's SDK harness); thread mode (PEMJA) since 1.15; the wordings checked "
                "in the flink-python jars of 1.20.3 and 2.3.0, the traceback shapes recorded with 1.20.3")
    exception_classes = ("pemja.core.PythonException",)  # its wrappers (RuntimeException, IOException) name nothing
    config_keys = ("python.executable", "python.client.executable", "python.execution-mode", "python.files",
                   "python.requirements", "python.archives", "python.pythonpath", "python.fn-execution.bundle.size")
    collect_next = _NEXT
    signatures = (
        r"Error received from SDK harness for instruction",
        r"PythonException: <class '",
        r"Cannot run program \"[^\"]*python[^\"]*\"",
        r"Python interpreter path: ",
        r"Process died with exit code",
        r"Traceback \(most recent call last\):",
        r"(?:ModuleNotFoundError|ImportError): ",
    )
    frames = (_PYTHON_TASK_FRAME,)
    wordings = (
        Wording(SLUG, r"Error received from SDK harness for instruction [\w-]+: ", "1.10 – 2.x",
                "org.apache.beam.runners.fnexecution.control.FnApiControlClient$ResponseStreamObserver (Beam, bundled "
                "in flink-python; the same text in 1.20.3 and 2.3.0): the Python worker's traceback follows",
                "java.lang.RuntimeException: Error received from SDK harness for instruction 1: Traceback (most "
                "recent call last):"),
        Wording(SLUG, r"(?:pemja\.core\.)?PythonException: <class '[\w.]+'>: ", "1.15 – 2.x",
                "pemja.core.PythonException (PEMJA, python.execution-mode: thread; recorded with 1.20.3): the Python "
                "exception's class and message, its frames printed as Java frames",
                "pemja.core.PythonException: <class 'ZeroDivisionError'>: float division by zero"),
        Wording(SLUG, r"Cannot run program \"[^\"]+\": error=\d+, (?:No such file or directory|Permission denied)",
                "1.10 – 2.x",
                "java.lang.ProcessBuilder#start, called by org.apache.flink.python.util.PythonEnvironmentManagerUtils "
                "with python.executable (1.20.3 and 2.3.0)",
                "java.io.IOException: Cannot run program \"/usr/local/bin/python3.8\": error=2, No such file or "
                "directory"),
        Wording(SLUG, r"Process died with exit code -?\d+", "1.10 – 2.x",
                "org.apache.beam.runners.fnexecution.environment.ProcessManager$RunningProcess (Beam, bundled in "
                "flink-python 1.20.3 and 2.3.0): the Python worker process ended",
                "java.lang.IllegalStateException: Process died with exit code 1"),
    )
    root_causes = (
        RootCause("user-function-raised",
                  "The job's own Python function raised an exception on its input: every restart replays the same "
                  "input into the same code and fails the same way.",
                  "A Python traceback (under 'Error received from SDK harness' or a pemja.core.PythonException) whose "
                  "deepest frame of the job's own code names the file, line and function, and the exception.",
                  patches=(_HANDLE,)),
        RootCause("module-missing-on-workers",
                  "The function needs a module the Python workers do not have: it was found where the job was "
                  "submitted, but not shipped with the job (python.files, python.requirements or python.archives).",
                  "ModuleNotFoundError or ImportError in the worker's traceback for a module that is not PyFlink's "
                  "own, often while cloudpickle loads the function.",
                  patches=("flink:python.files", "flink:python.requirements")),
        RootCause("interpreter-without-pyflink",
                  "The interpreter the workers run is not one apache-flink is installed in: PyFlink's own modules "
                  "or its dependencies cannot be imported there.",
                  "ModuleNotFoundError for pyflink, pemja, apache_beam, cloudpickle or another package apache-flink "
                  "depends on.",
                  patches=("flink:python.executable", "flink:python.pythonpath", "flink:python.archives")),
        RootCause("python-interpreter-missing",
                  "python.executable names an interpreter the TaskManager host does not have, or may not run.",
                  "'Cannot run program \"<python.executable>\": error=2, No such file or directory' (or error=13, "
                  "Permission denied) from PythonEnvironmentManagerUtils as the Python operator opens.",
                  patches=("flink:python.executable", "flink:python.archives")),
        RootCause("undetermined",
                  "A Python function of the job failed in its worker, but the logs keep no Python exception that "
                  "says why.",
                  "Flink's message (SDK harness error, PythonException, the worker process dying) without the "
                  "Python traceback.",
                  patches=(_COLLECT,),
                  would_change="The Python traceback under Flink's message: the job's file and line (its own "
                               "code raised), ModuleNotFoundError (a module to ship, or an interpreter without "
                               "PyFlink), or 'Cannot run program' (python.executable).",
                  next_evidence=_NEXT),
    )

    templates = {
        "head": "A Python function of task '{task}' failed in its Python worker ({mode}). ",
        "head without task": "A Python function of the job failed in its Python worker ({mode}). ",
        "mode process": "process mode: Beam's SDK harness",
        "mode thread": "thread mode: PEMJA inside the TaskManager",
        "repeats": " The same failure ended {count} attempts of the task.",
        "user-function-raised": "The job's own code raised {exception}{message} in {function} at {file}, line {line}"
                                "{code}. Fix the function or guard it against this input; a restart replays the "
                                "same records and fails again.",
        "code": " (`{code}`)",
        "message": ": {message}",
        "module-missing-on-workers": "The worker cannot import the module '{module}' ({exception}{message}){where}: "
                                     "the job's code needs it, it was found where the job was submitted but not "
                                     "shipped to the TaskManagers. Ship it with python.files (the job's own module, "
                                     "package or .zip) or python.requirements (a package from PyPI).",
        "where unpickling": ", while cloudpickle loaded the function: the function refers to that module",
        "where frame": ", imported at {frame}",
        "interpreter-without-pyflink": "The worker cannot import '{module}' ({exception}{message}), a module of "
                                       "PyFlink itself or one it depends on: the interpreter the workers run "
                                       "({interpreter}) is not one apache-flink=={version} is installed in.{thread}",
        "thread venv": " In thread mode the TaskManager embeds the interpreter's library, which does not read a "
                       "virtualenv's settings: name the virtualenv's site-packages in python.pythonpath.",
        "python-interpreter-missing": "python.executable is '{program}', which the TaskManager host {reason} "
                                      "(error={errno}): the Python worker cannot start, so no Python function of the "
                                      "job can run.",
        "reason 2": "does not have",
        "reason 13": "may not run",
        "undetermined": "Flink's message shows the Python worker failed{what}, but not the Python exception or where "
                        "it was raised: root cause undetermined.",
        "what exception": " with {exception}",
        "what died": " (the worker process died with exit code {code})",
        "what gone": " without an answer: its connection ended ({words}), as when the worker process is killed (the "
                     "kernel's OOM killer, a container's memory limit, a signal) or crashes in native code",
        "excerpt": " From an excerpt: whether the job restarted and failed again does not show.",
        "failure note": "the Python worker's failure: {text}",
        "frame note": "raised at {frame}",
        "interpreter note": "the interpreter the TaskManager runs: {path}",
        "handle": "{function} raises {exception} on some input ({file}, line {line}); catch it there and return None "
                  "(SQL NULL) or route the record aside, or validate the input before the call. Restarting cannot "
                  "help: the same records come back.",
        "handle snippet": "@udf(result_type=...)\n"
                          "def {function}(...):\n"
                          "    try:\n"
                          "        ...                       # the body as it is ({file}, line {line})\n"
                          "    except {exception}:\n"
                          "        logging.warning(\"{function}: skipped %r\", ...)   # the input, for a replay\n"
                          "        return None               # NULL in SQL; or filter such rows before the call",
        "ship module": "Ship the job's module '{module}' with the job ({value}): the client uploads it and every "
                       "Python worker finds it on its path. For a package from PyPI use python.requirements instead.",
        "requirements": "When '{module}' comes from a package on PyPI: list it in a requirements file "
                        "(its PyPI name, pinned); the workers install it before running the function.",
        "interpreter from client": "The client ran the job with {value}; the workers need an interpreter with "
                                   "apache-flink=={version} at this path on every TaskManager host.",
        "interpreter in archive": "Ship an interpreter with apache-flink=={version} installed as an archive of a "
                                  "virtualenv, and run the workers with the interpreter inside it.",
        "archive": "A zipped virtualenv with apache-flink=={version} installed, unpacked next to every Python "
                   "worker (python -m venv venv && venv/bin/pip install apache-flink=={version} && zip -r venv.zip "
                   "venv).",
        "pythonpath": "The interpreter embedded in the TaskManager sees the virtualenv's packages through "
                      "python.pythonpath: its site-packages folder ({venv}/bin/python -c 'import site; "
                      "print(site.getsitepackages()[0])' prints it).",
        "collect": "Flink's message is the Python worker's failure; the Python traceback under it names the exception "
                   "and the job's file and line.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        # A traceback counts where the worker reported it; the client's own (the job script failing where it is
        # submitted, "Python process exits with code: N") is not a worker's failure.
        failures = [f for ev in incident.events if _from_worker(ev) for f in python_failures(ev)]
        cannot_run = [(ev, m) for ev, m in incident.find(CANNOT_RUN) if "python" in m["program"].lower()
                      or _is_interpreter(incident, m["program"])]
        wordings = [ev for ev in incident.events
                    if SDK_HARNESS_ERROR.search(ev.text) or PEMJA_ERROR.search(ev.text) or PROCESS_DIED.search(ev.text)
                    or (REMOTE_BUNDLE.search(ev.text) and WORKER_GONE.search(ev.text))]
        if not failures and not cannot_run and not wordings:
            return []
        evidence, notes, add = evidence_trail()
        excerpt = is_excerpt(incident)
        if cannot_run:
            event, m = _best_event(cannot_run)
            cause = "python-interpreter-missing"
            summary = self._head(event, _mode(incident, None)) + self.say(
                cause, program=m["program"], reason=self.say("reason 13" if m["errno"] == "13" else "reason 2"),
                errno=m["errno"])
            add(event, self.say("failure note", text=m.group(0)))
            for ev, im in incident.find(INTERPRETER_PATH):
                add(ev, self.say("interpreter note", path=im["path"]))
                break
            details = {"program": m["program"], "error": m.group(0), "task": _task(event) or "not in these logs"}
            patches = self._interpreter_patches(incident)
            summary += self._repeats(_attempts(ev for ev, _ in cannot_run))
            return [self.finding(cause, summary, evidence, notes=notes, confidence=0.9 if not excerpt else 0.8,
                                 patches=patches, details=details)]
        best = _best_failure(failures)
        event = best.event if best else wordings[0]
        mode = _mode(incident, best)
        summary = self._head(event, mode)
        details: dict = {"execution_mode": mode, "task": _task(event) or "not in these logs"}
        module = best.missing_module if best else None
        frame = best.user_frame if best else None
        if best and best.exception:
            add(event, self.say("failure note", text=best.text[:300]))
            details.update(exception=best.exception, message=best.message[:300] or "none")
        else:
            add(event, self.say("failure note", text=_wording_text(event)))
        if module:
            root = module.split(".")[0]
            details["missing_module"] = module
            if root in PYFLINK_OWN_MODULES:
                cause = "interpreter-without-pyflink"
                interpreter = _interpreter(incident) or "python (the default)"
                thread = mode == "thread" and _venv(incident) is not None
                summary += self.say(cause, module=module, exception=best.exception, message=_message(self, best),
                                    interpreter=interpreter, version=_version(incident),
                                    thread=self.say("thread venv") if thread else "")
                patches = self._interpreter_patches(incident, thread=thread)
                confidence = 0.85
            else:
                cause = "module-missing-on-workers"
                unpickling = any("cloudpickle" in f.file or f.function == "loads" for f in best.frames[-2:])
                where = (self.say("where unpickling") if unpickling else
                         self.say("where frame", frame=frame.where()) if frame else "")
                summary += self.say(cause, module=module, exception=best.exception, message=_message(self, best),
                                    where=where)
                if frame:
                    details["imported_at"] = frame.where()
                patches = self._module_patches(incident, root)
                confidence = 0.85
        elif best and best.exception and frame:
            cause = "user-function-raised"
            summary += self.say(cause, exception=best.exception, message=_message(self, best),
                                function=frame.function, file=frame.file, line=frame.line,
                                code=self.say("code", code=frame.code) if frame.code else "")
            details.update(file=frame.file, line=frame.line, function=frame.function,
                           code=frame.code or "not in the logs")
            add(event, self.say("frame note", frame=frame.where()))
            patches = [self.code_patch(
                "handle the failing input in the Python function",
                self.say("handle snippet", function=frame.function, file=frame.file, line=frame.line,
                         exception=best.exception),
                self.say("handle", function=frame.function, exception=best.exception, file=frame.file,
                         line=frame.line))]
            confidence = 0.85
        else:
            cause = "undetermined"
            died = next((m for ev in wordings for m in [PROCESS_DIED.search(ev.text)] if m), None)
            gone = next((m for ev in wordings for m in [WORKER_GONE.search(ev.text)] if m), None)
            what = (self.say("what exception", exception=best.exception) if best and best.exception else
                    self.say("what died", code=died["code"]) if died else
                    self.say("what gone", words=gone.group(0)) if gone else "")
            summary += self.say(cause, what=what)
            patches = [self.ops_patch("collect the Python traceback", self.say("collect"),
                                      snippet="grep -n -A60 -E 'Error received from SDK harness|"
                                              "pemja.core.PythonException|Traceback' taskmanager*.log\n"
                                              "# a worker that died without a traceback: what killed it, on the "
                                              "TaskManager's host\n"
                                              "dmesg -T | grep -iE 'killed process|out of memory'")]
            confidence = 0.5
        if cause != "undetermined":
            summary += self._repeats(_attempts(f.event for f in failures if best and f.text == best.text))
        if excerpt:
            summary += self.say("excerpt")
            confidence = min(confidence, 0.75)
        return [self.finding(cause, summary.strip(), evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    def _head(self, event: Event, mode: str) -> str:
        task = _task(event)
        mode_text = self.say(f"mode {mode}")
        if task:
            return self.say("head", task=task, mode=mode_text)
        return self.say("head without task", mode=mode_text)

    def _repeats(self, count: int) -> str:
        return self.say("repeats", count=count) if count > 1 else ""

    def _module_patches(self, incident: Incident, root: str):
        current = incident.config.get("python.files")
        value = f"{current},{root}.py" if current else f"{root}.py"
        return [self.flink_patch(incident, "python.files", value, self.say("ship module", module=root, value=value)),
                self.flink_patch(incident, "python.requirements", incident.config.get("python.requirements")
                                 or "requirements.txt", self.say("requirements", module=root))]

    def _interpreter_patches(self, incident: Incident, thread: bool = False):
        version = _version(incident)
        client = incident.config.get("python.client.executable")
        current = incident.config.get("python.executable")
        venv = _venv(incident)
        if thread and venv:
            site = _site_packages(incident, venv)
            return [self.flink_patch(incident, "python.pythonpath", site, self.say("pythonpath", venv=venv))]
        if client and client != current:
            return [self.flink_patch(incident, "python.executable", client,
                                     self.say("interpreter from client", value=client, version=version))]
        return [self.flink_patch(incident, "python.archives", "venv.zip", self.say("archive", version=version)),
                self.flink_patch(incident, "python.executable", "venv.zip/venv/bin/python",
                                 self.say("interpreter in archive", version=version))]


def _attempts(events) -> int:
    """Attempts of the task that failed this way: the TaskManager's records of a task switching to FAILED."""
    return len({(ev.file, ev.line) for ev in events
                if ev.role == "taskmanager" and TASK_FAILED.search(ev.message)})


def _task(event: Event) -> str | None:
    """The failed task's name without its subtask index and attempt."""
    name = task_name(event)
    return re.sub(r"\s*\(\d+/\d+\)(?:#\d+)?$", "", name) if name else None


def _from_worker(event: Event) -> bool:
    """Flink's message of a worker's failure, the worker's own log record, or a traceback (pasted alone) through the
    worker's code."""
    return bool(SDK_HARNESS_ERROR.search(event.text) or PEMJA_ERROR.search(event.text)
                or WORKER_LOGGER.search(event.logger or "") or any(WORKER_FRAME.search(b) for b in event.body))


def _best_failure(failures: list[PythonFailure]) -> PythonFailure | None:
    """The TaskManager's own failure record with the exception, the job's frame and the most frames."""
    return min(failures, key=lambda f: (f.exception is None, f.user_frame is None and f.missing_module is None,
                                        not _is_task_failure(f.event), f.event.role != "taskmanager",
                                        -len(f.frames), f.event.line), default=None)


def _best_event(matches):
    return sorted(matches, key=lambda m: (m[0].role != "taskmanager", not _is_task_failure(m[0]), m[0].line))[0]


def _is_task_failure(event: Event) -> bool:
    return bool(event.chain) and any(c.kind != "python" for c in event.chain)


def _mode(incident: Incident, failure: PythonFailure | None) -> str:
    if failure is not None:
        return failure.mode
    return "thread" if (incident.config.get("python.execution-mode") or "").strip() == "thread" else "process"


def _message(detector: Detector, failure: PythonFailure) -> str:
    return detector.say("message", message=failure.message[:240]) if failure.message else ""


def _wording_text(event: Event) -> str:
    for rx in (SDK_HARNESS_ERROR, PEMJA_ERROR, PROCESS_DIED, WORKER_GONE):
        m = rx.search(event.text)
        if m:
            return m.group(0).rstrip(":")
    return event.message[:200]


def _interpreter(incident: Incident) -> str | None:
    logged = next((m["path"] for _, m in incident.find(INTERPRETER_PATH)), None)
    return logged or incident.config.get("python.executable")


def _is_interpreter(incident: Incident, program: str) -> bool:
    return program == _interpreter(incident)


def _venv(incident: Incident) -> str | None:
    """The virtualenv the interpreter belongs to (``/opt/venv`` of ``/opt/venv/bin/python``), if it looks like one."""
    m = re.match(r"^(?P<venv>/.+)/bin/python[\d.]*$", _interpreter(incident) or "")
    return m["venv"] if m else None


def _site_packages(incident: Incident, venv: str) -> str:
    seen = next((m.group(0) for _, m in incident.find(re.escape(venv) + r"/lib/python3\.\d+/site-packages")), None)
    return seen or f"{venv}/lib/python3.<minor>/site-packages"


def _version(incident: Incident) -> str:
    return str(incident.flink_version) if incident.flink_version else "<the cluster's Flink version>"
