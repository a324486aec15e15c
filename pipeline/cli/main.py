"""A thin ``@hydra.main`` over :func:`app.run`: a user mistake is one stderr line and exit 2, never
a traceback; outputs written but not logged exit 3 (in a multirun, after every job)."""

from __future__ import annotations

import gc
import io
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, nullcontext, redirect_stdout
from functools import partial
from pathlib import Path
from types import FrameType
from typing import NoReturn

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# MLflow's own INFO lines (store migrations) are not the user's concern; warnings still show
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig

from paraeval.pipeline.cli.checks import (
    GROUPS,
    check_cluster_address,
    check_config_file_passwords,
    check_grammar,
    check_group_overrides,
    check_output_dir_overrides,
    check_override_keys,
    is_multirun,
    move_passwords_to_env,
)
from paraeval.pipeline.config.compose import config_dir
from paraeval.pipeline.errors import ConfigError, Interrupted, RunContext, UserError, being_handled
from paraeval.pipeline.lifetime import RUN_PID_ENV, in_sweep_worker
from paraeval.pipeline.names import escape_log_output, escape_warnings, show
from paraeval.pipeline.terminal import fit
from paraeval.pipeline.version import __version__

# the jobs of a sweep may run in other processes: they record their status in a file
EXIT_OK = 0
EXIT_USER_ERROR = 2  # a mistake in the input or the settings, one line says which
EXIT_NOT_LOGGED = 3  # outputs written but not logged; the warning line says how to log them
EXIT_INCOMPLETE = 4  # tables written and logged, some figures missing; the warning names them
SEVERITY = (EXIT_USER_ERROR, EXIT_NOT_LOGGED, EXIT_INCOMPLETE)  # the most serious first
OUTCOME_ENV = "PARAEVAL_OUTCOME_FILE"

RECORDED: list[int] = []  # where no file is named (a job run without the command line)


def record(status: int) -> None:
    """0 is recorded too: the file lists every job."""
    path = os.environ.get(OUTCOME_ENV)
    if not path:
        RECORDED.append(status)
        return
    # one short append: whole lines even when jobs in several processes write at once
    with open(path, "a", encoding="ascii") as file:
        file.write(f"{status}\n")


def worst(statuses: list[int]) -> int:
    """An interrupt's status, then :data:`SEVERITY`'s order; 0 when every job went well."""
    ordered = [s for s in statuses if s > 128] + [s for s in SEVERITY if s in statuses]
    return ordered[0] if ordered else max(statuses, default=EXIT_OK)


@contextmanager
def recording() -> Iterator[list[int]]:
    """A fresh file for this command's jobs; on the way out the list holds every status."""
    fd, name = tempfile.mkstemp(prefix="paraeval-outcome-")
    os.close(fd)
    before = os.environ.get(OUTCOME_ENV)
    os.environ[OUTCOME_ENV] = name
    statuses: list[int] = []
    try:
        yield statuses
    finally:
        text = Path(name).read_text() if Path(name).exists() else ""
        statuses.extend(int(line) for line in text.split() if line.isdigit())
        Path(name).unlink(missing_ok=True)
        if before is None:
            os.environ.pop(OUTCOME_ENV, None)
        else:
            os.environ[OUTCOME_ENV] = before


def _fail(message: str) -> NoReturn:
    print(f"paraeval: error: {show(message)}", file=sys.stderr)
    sys.exit(EXIT_USER_ERROR)


def _hydra_main(context: RunContext) -> None:
    @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
    def job(cfg: DictConfig) -> None:
        _job(cfg, context)

    job()


def _job(cfg: DictConfig, context: RunContext) -> None:
    from paraeval.metrics.base import MetricConfigError, MissingResourceError
    from paraeval.pipeline.cli.app import run

    hc = HydraConfig.get()
    escape_log_output()
    escape_warnings()
    # warnings of libraries (MLflow's dataset source, say) go to paraeval.log, not the terminal
    logging.captureWarnings(True)
    out = context.out_dir = Path(hc.runtime.output_dir)
    # what is alive between jobs is long-lived: frozen, the collector stops rescanning it
    gc.freeze()
    worker = in_sweep_worker()
    if worker:  # SIGTERM sent to this worker alone stops its job, not the sweep
        signal.signal(signal.SIGTERM, signal_handler(context))
    try:
        run(cfg, out, list(hc.overrides.task), context)
    except (UserError, MetricConfigError, MissingResourceError) as exc:
        # printed once by _fail; the log file keeps it too
        logging.getLogger("paraeval").error("%s", exc, extra={"file_only": True})
        if hc.mode != RunMode.MULTIRUN:
            _fail(str(exc))
        # one job's mistake (a value of the sweep) does not stop the others
        print(f"paraeval: error: sweep job {hc.job.num} ({out}): {show(exc)}", file=sys.stderr)
        record(EXIT_USER_ERROR)
        return
    except Interrupted as exc:
        if not worker:
            raise  # the command's own Ctrl-C or SIGTERM: the sweep stops
        context.taken()
        print(
            f"paraeval: interrupted ({exc.name}): sweep job {hc.job.num} ({out}) stopped; "
            "the sweep goes on",
            file=sys.stderr,
            flush=True,
        )
        record(exc.status)
        return
    finally:
        if worker:  # between jobs a worker is joblib's
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    drawn = EXIT_INCOMPLETE if out in context.figures_missing else EXIT_OK
    record(EXIT_NOT_LOGGED if out in context.not_logged else drawn)
    gc.freeze()


# A signal in SQLAlchemy (cut mid-flush, the store cannot mark runs KILLED) or in code that swallows
# exceptions (weakref callbacks, __del__: exit 0) is raised later, in code that unwinds cleanly.
_UNSAFE_MODULES = ("sqlalchemy", "alembic", "mlflow")
_SWALLOWING_MODULES = ("weakref",)
_RETRY_S = 0.02


def _in_unsafe_code(frame: FrameType | None) -> bool:
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        swallowing = module in _SWALLOWING_MODULES or frame.f_code.co_name == "__del__"
        if module.startswith(_UNSAFE_MODULES) or swallowing:
            return True
        frame = frame.f_back
    return False


def signal_handler(context: RunContext) -> Callable[[int, FrameType | None], None]:
    return partial(_on_signal, context)


def _on_signal(context: RunContext, signum: int, frame: FrameType | None) -> None:
    # one signal, one cleanup: a second Ctrl-C while MLflow runs are being closed is ignored
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, partial(_raise_pending, context))
    signal.setitimer(signal.ITIMER_REAL, _RETRY_S)
    if _in_unsafe_code(frame):
        context.deferred_signals.append(signum)
        return
    # kept until caught where it is acted on: the timer raises it again if it was swallowed
    context.raised_signals[:] = [signum]
    raise Interrupted(signum)


def _raise_pending(context: RunContext, _alarm: int, frame: FrameType | None) -> None:
    if context.deferred_signals:
        if _in_unsafe_code(frame):
            signal.setitimer(signal.ITIMER_REAL, _RETRY_S)
            return
        context.raise_deferred()  # the checkpoints' path: the timer stops, the signal is taken
    if not context.raised_signals:  # taken already
        return
    signal.setitimer(signal.ITIMER_REAL, _RETRY_S)
    if being_handled() or _in_unsafe_code(frame):
        return  # on its way to the code that acts on it, or in code that would swallow it
    raise Interrupted(context.raised_signals[0])


def _interrupted(exc: BaseException, context: RunContext) -> None:
    """The shell's exit status for the signal (130 SIGINT, 143 SIGTERM)."""
    context.taken()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signalled = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
    where, out = "", context.out_dir
    if out is not None:
        where = f"; outputs written so far are kept in {out}"
        if (out / "run_info.json").is_file():
            where += f"; log them later with: paraeval-log {out}"
    message = f"paraeval: interrupted ({signalled.name}){where}"
    tqdm = sys.modules.get("tqdm")
    if tqdm is not None:  # a progress bar on the line is moved out of the message's way
        tqdm.tqdm.write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr, flush=True)
    sys.exit(signalled.status)


def main() -> None:
    # the workers of a parallel sweep die with this process (their initializer reads it)
    os.environ[RUN_PID_ENV] = str(os.getpid())
    # transformers' "Loading weights" bar would be drawn on stderr, which holds paraeval's lines
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    context = RunContext()
    signal.signal(signal.SIGINT, signal_handler(context))
    signal.signal(signal.SIGTERM, signal_handler(context))
    argv = sys.argv[1:]
    try:
        with recording() if is_multirun(argv) else nullcontext(RECORDED) as statuses:
            _main(argv, context)
        status = worst(statuses)
        if status != EXIT_OK:
            sys.exit(status)
    except (KeyboardInterrupt, Interrupted) as exc:
        _interrupted(exc, context)
    except BrokenPipeError:
        # stdout's reader went away: Python's flush at exit must not fail again (its signal docs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


def _main(argv: list[str], context: RunContext) -> None:
    # a log line that cannot be written (disk full) must not print a traceback per line
    logging.raiseExceptions = False
    if argv[:1] in (["--version"], ["-V"]):
        print(f"paraeval {__version__}")
        return
    # shell completion is no run: its ``install=``/``query=`` are Hydra's words, not settings
    completion = any(a in ("-sc", "--shell-completion") for a in argv)
    help_ = any(a in ("--help", "-h", "--hydra-help") for a in argv)
    checks: list[Callable[[list[str]], None]] = []
    if not completion and not help_:
        checks.append(check_config_file_passwords)
    if not (completion or help_ or any(a in ("--info", "--cfg", "-c") for a in argv)):
        checks += [check_grammar, check_group_overrides, check_override_keys]
        checks += [check_cluster_address, check_output_dir_overrides]
    try:
        # before Hydra sees the command line: it saves the overrides in the output folder
        argv = move_passwords_to_env(argv)
        sys.argv[1:] = argv
        for check in checks:
            check(argv)
    except ConfigError as exc:
        _fail(str(exc))
    # Hydra's own errors come back here (rather than printed over several lines) to be one line
    full_error = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        if help_:
            _help(context)
        elif completion and any(a.startswith("query=") for a in argv):
            _complete(argv, context)
        else:
            _hydra_main(context)
    except HydraException as exc:
        if full_error:
            raise  # the user asked for Hydra's whole story
        # the first paragraph says what is wrong; the rest lists search paths and the like
        said = " ".join(line.strip() for line in str(exc).strip().split("\n\n")[0].splitlines())
        _fail(said or type(exc).__name__)
    except BrokenProcessPool:
        print(
            "paraeval: error: the sweep stopped: one of its worker processes was killed (out of "
            "memory? kill -9?); the jobs finished before it keep their folders and MLflow runs",
            file=sys.stderr,
        )
        sys.exit(1)


def _help(context: RunContext) -> None:
    """Fitted to 100 columns (Hydra prints a group's options on one line)."""
    buffer = io.StringIO()
    try:
        with redirect_stdout(buffer):
            _hydra_main(context)
    finally:
        sys.stdout.write(fit(buffer.getvalue()))
        sys.stdout.flush()


def _complete(argv: list[str], context: RunContext) -> None:
    """Hydra's candidates but class paths (``data._target_=``), and a group's options in a list or
    a sweep, which Hydra does not offer (``metrics=[bleu,ch`` -> ``metrics=[bleu,chrf``)."""
    line = os.environ.get("COMP_LINE", "")
    word = "" if line.endswith(" ") else (line.split() or [""])[-1]
    key, _, value = word.partition("=")
    cut = max(value.rfind(","), value.rfind("[")) + 1  # where the list's next option starts
    if key.lstrip("+~") in GROUPS and cut:
        prefix, chosen = value[cut:], value[:cut].replace("[", ",").split(",")
        options = sorted(p.stem for p in (config_dir() / key.lstrip("+~")).glob("*.yaml"))
        start = word.removesuffix(prefix)
        found = [start + o for o in options if o.startswith(prefix) and o not in chosen]
    else:
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            _hydra_main(context)
        keys = [(c, c.partition("=")[0].split(".")) for c in buffer.getvalue().split()]
        found = [c for c, parts in keys if not any(p.startswith("_") for p in parts)]
    # the shell's script reads them from stdout: fish one a line, bash and zsh spaced
    print(("\n" if "query=fish" in argv else " ").join(found))


if __name__ == "__main__":
    main()
