"""Command line entry: ``paraeval [overrides]``, a thin ``@hydra.main`` over :func:`app.run`. User
mistakes end with one line on stderr and exit code 2, never a traceback; a run whose outputs are
written but not logged exits 3 after its warning line (in a multirun, after every job)."""

from __future__ import annotations

import difflib
import gc
import io
import logging
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from contextlib import nullcontext, redirect_stdout
from functools import cache, partial
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# MLflow's own INFO lines (store migrations) are not the user's concern; warnings still show
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from paraeval.pipeline.cli import outcome
from paraeval.pipeline.cli.credentials import (
    check_config_files,
    check_config_passwords,
    move_passwords_to_env,
)
from paraeval.pipeline.cli.outcome import EXIT_NOT_LOGGED, EXIT_USER_ERROR
from paraeval.pipeline.config.compose import config_dir
from paraeval.pipeline.context import RunContext
from paraeval.pipeline.errors import ConfigError, Interrupted, being_handled, suggest
from paraeval.pipeline.lifetime import RUN_PID_ENV, in_sweep_worker
from paraeval.pipeline.names import escape_log_output, escape_warnings, show
from paraeval.pipeline.terminal import fit
from paraeval.pipeline.version import __version__

ADDRESS_KEY = "hydra.launcher.ray.init.address"
GROUPS = (
    "data",
    "metrics",
    "normalize",
    "correlation",
    "tracking",
    "engine",
    "experiment",
    "compare",
)


def _fail(message: str) -> NoReturn:
    print(f"paraeval: error: {show(message)}", file=sys.stderr)
    sys.exit(EXIT_USER_ERROR)


def user_config_dirs(argv: list[str]) -> list[Path]:
    """Folders a user adds to Hydra's search path (``--config-dir``, ``hydra.searchpath``)."""
    out: list[Path] = []
    for i, arg in enumerate(argv):
        for flag in ("--config-dir", "-cd"):
            if arg == flag and i + 1 < len(argv):
                out.append(Path(argv[i + 1]).expanduser())
            elif arg.startswith(flag + "="):
                out.append(Path(arg.partition("=")[2]).expanduser())
        key, _, value = arg.partition("=")
        if key.lstrip("+") == "hydra.searchpath":
            for entry in value.strip("[]").split(","):
                entry = entry.strip().strip("'\"")
                if entry.startswith("file://"):
                    out.append(Path(entry.removeprefix("file://")).expanduser())
                elif entry and "://" not in entry:
                    out.append(Path(entry).expanduser())
    return out


def _overrides(argv: list[str]) -> list[str]:
    """The Hydra overrides of ``argv`` (flags and their values left out)."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in ("--config-dir", "-cd", "--config-name", "-cn", "--config-path", "-cp"):
            next(args, None)  # the flag's value
        elif not arg.startswith("-") and "=" in arg:
            out.append(arg)
    return out


def check_grammar(argv: list[str]) -> None:
    """An override Hydra cannot parse (``'metrics=[bleu,chrf'``) as one line naming it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for arg in _overrides(argv):
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as exc:
            # Hydra's text: the parser's complaint, then a line pointing at its grammar page
            said = exc.message.splitlines()[0] if exc.message else "syntax error"
            raise ConfigError(
                f"cannot read the override '{arg}' (Hydra's parser: {said}); check its brackets, "
                "braces and quotes, e.g. 'metrics=[bleu,chrf]'"
            ) from None


def check_group_overrides(argv: list[str]) -> None:
    """Unknown group options (``metrics=[bleu,nosuch]``) as one line before Hydra composes."""
    folders = [*user_config_dirs(argv), config_dir()]
    for arg in _overrides(argv):
        key, _, value = arg.partition("=")
        key = key.lstrip("+~")
        if key not in GROUPS or value in ("", "null"):
            continue
        options = {p.stem for folder in folders for p in (folder / key).glob("*.yaml")}
        for choice in [v.strip() for v in value.strip("[]").split(",") if v.strip()]:
            if choice not in options and "/" not in choice and "$" not in choice:
                hint = suggest(choice, options, f"{key} options")
                raise ConfigError(f"unknown {key} option '{choice}' in '{arg}'; {hint}")


def check_override_keys(argv: list[str]) -> None:
    """A setting that does not exist (``metrics.ibleu.alhpa=0.5``, ``hydra.run.dri=out``) as one
    line naming the nearest valid key (Hydra would suggest adding it with ``+``)."""
    overrides = [(arg, arg.partition("=")[0]) for arg in _overrides(argv)]
    plain = [
        (arg, key)
        for arg, key in overrides
        if not (key.startswith(("+", "~")) or "/" in key or "@" in key or key in GROUPS)
    ]
    cfg = _compose_selections(tuple(argv)) if plain else None
    if cfg is None:
        return
    for arg, key in plain:
        node: object = cfg
        path: list[str] = []
        for part in key.split("."):
            if not isinstance(node, DictConfig):
                break  # a list index or a value: Hydra's own message is clear
            valid = [str(k) for k in node]  # `in` on a DictConfig skips keys set to ???
            if part not in valid:
                near = difflib.get_close_matches(part, valid, n=1, cutoff=0.5)
                hint = f"valid here: {', '.join(valid)}" if valid else f"add it with '+{arg}'"
                if near:
                    hint = f"did you mean '{'.'.join([*path, near[0]])}'?"
                raise ConfigError(f"unknown setting '{'.'.join([*path, part])}' in '{arg}'; {hint}")
            try:
                node = node[part]
            except Exception:  # ??? or an interpolation: nothing to check below it
                break
            path.append(part)


@cache
def _compose_selections(argv: tuple[str, ...]) -> DictConfig | None:
    """The config, Hydra's included, of the group selections of ``argv`` and the user's config
    folders alone; None where Hydra cannot compose it (it then says why)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    overrides = [(arg, arg.partition("=")[0]) for arg in _overrides(list(argv))]
    selections = [arg for arg, key in overrides if key.lstrip("+~") in GROUPS or "/" in key]
    searchpath = [f"file://{d.resolve()}" for d in user_config_dirs(list(argv))]
    if searchpath:
        selections.append(f"hydra.searchpath=[{','.join(searchpath)}]")
    try:
        GlobalHydra.instance().clear()
        with initialize_config_dir(str(config_dir()), version_base="1.3", job_name="paraeval"):
            return compose("config", overrides=selections, return_hydra_config=True)
    except Exception:  # Hydra reports a selection it cannot compose itself
        return None
    finally:
        GlobalHydra.instance().clear()


def check_config_file_passwords(argv: list[str]) -> None:
    """A password in a user's config file (paraeval's own files hold none) as one line, before
    Hydra saves it in ``.hydra/config.yaml``."""
    folders = user_config_dirs(argv)
    if not folders:
        return
    cfg = _compose_selections(tuple(argv))
    if cfg is None:  # a sweep over groups does not compose here: every file of the folders is read
        check_config_files(folders)
        return
    config = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(config, dict)
    check_config_passwords({k: v for k, v in config.items() if k != "hydra"})


def check_output_dir_overrides(argv: list[str]) -> None:
    """An output folder that cannot be created as one line (Hydra creates it before paraeval's
    code runs and would answer with a traceback)."""
    from paraeval.pipeline.files import check_writable

    multirun = any(a in ("-m", "--multirun") for a in argv)
    wanted = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    given = False
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key.lstrip("+") not in ("hydra.run.dir", "hydra.sweep.dir"):
            continue
        given = given or key.lstrip("+") == wanted
        if not value or "${" in value:
            continue  # interpolated: resolved by Hydra, checked by the run itself
        check_writable(Path(value).expanduser(), key.lstrip("+"), value)
    if not given:
        # the default folders (outputs/..., multirun/...) are relative to the current directory
        default = "multirun" if multirun else "outputs"
        check_writable(Path.cwd() / default, wanted, str(Path.cwd() / default))


def check_cluster_address(argv: list[str]) -> None:
    """A sweep's Ray cluster that does not answer as one line, before any job starts."""
    from paraeval.pipeline.config.nodes import check_reachable

    if _multirun(argv):
        cfg = _compose_selections(tuple(argv))
        check_reachable(given_address(_overrides(argv), cfg), ADDRESS_KEY)


def given_address(overrides: list[str], cfg: Any) -> str | None:
    """The address a sweep with the Ray launcher joins: the last override of the key, else the
    composed config's value; None where no Ray launcher is selected or Ray starts locally."""
    launcher = cfg.get("hydra", {}).get("launcher", {}) if cfg is not None else {}
    if not str(launcher.get("_target_", "")).startswith("hydra_plugins.hydra_ray_launcher."):
        return None
    address = launcher.get("ray", {}).get("init", {}).get("address")
    for arg in overrides:
        key, _, value = arg.partition("=")
        if key.lstrip("+") == ADDRESS_KEY:
            address = None if value == "null" else value
    return None if address is None else str(address)


def _multirun(argv: list[str]) -> bool:
    return any(a in ("-m", "--multirun", "hydra.mode=MULTIRUN") for a in argv)


def _hydra_main(context: RunContext) -> None:
    """Hydra's application over :func:`_job`, each job with the command's ``context``."""

    @hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
    def job(cfg: DictConfig) -> None:
        _job(cfg, context)

    job()


def _job(cfg: DictConfig, context: RunContext) -> None:
    from paraeval.metrics.base import MetricConfigError, MissingResourceError
    from paraeval.pipeline.cli.app import run
    from paraeval.pipeline.errors import UserError

    hc = HydraConfig.get()
    # names and cells from data reach the console and the log file escaped
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
        outcome.record(EXIT_USER_ERROR)
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
        outcome.record(exc.status)
        return
    finally:
        if worker:  # between jobs a worker is joblib's
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if out in context.not_logged:
        outcome.record(EXIT_NOT_LOGGED)
    elif out in context.figures_missing:
        outcome.record(outcome.EXIT_INCOMPLETE)
    else:
        outcome.record(outcome.EXIT_OK)
    gc.freeze()


# A signal that lands in code an exception must not cut in two (SQLAlchemy between a flush and its
# rollback can leave the store unusable for the cleanup that marks runs KILLED), or in code that
# swallows exceptions (a weakref callback, a __del__: the run would exit 0), is raised a moment
# later, once the main thread is back in code that unwinds cleanly. MLflow is named as a whole:
# its store is an internal of it, reached only through its client.
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
    """The handler of SIGINT and SIGTERM for the run of ``context``."""
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
    """One line and the shell's exit status for the signal (130 SIGINT, 143 SIGTERM); the line
    says how to log the output folder later (an MLflow run being logged was ended KILLED)."""
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
    # loading the encoder drew transformers' "Loading weights" bar on stderr, which holds
    # paraeval's lines only: huggingface_hub's switch, read when transformers is imported
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    context = RunContext()
    signal.signal(signal.SIGINT, signal_handler(context))
    signal.signal(signal.SIGTERM, signal_handler(context))
    argv = sys.argv[1:]
    # the jobs of a sweep may run in other processes: they record their status in a file
    try:
        with outcome.recording() if _multirun(argv) else nullcontext(outcome.RECORDED) as statuses:
            _main(argv, context)
        status = outcome.worst(statuses)
        if status != outcome.EXIT_OK:
            sys.exit(status)
    except (KeyboardInterrupt, Interrupted) as exc:
        _interrupted(exc, context)
    except BrokenPipeError:
        # stdout's reader went away (`paraeval -sc install=bash | head`): nothing more to say,
        # and Python's flush at exit must not fail again (the recipe of Python's signal docs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


def _main(argv: list[str], context: RunContext) -> None:
    # a log line that cannot be written (disk full) must not print a traceback per line
    logging.raiseExceptions = False
    if argv[:1] in (["--version"], ["-V"]):
        print(f"paraeval {__version__}")
        return
    # Hydra's shell completion (``-sc install=bash``, ``-sc query=bash``) is no run: its
    # ``install=``/``query=`` are Hydra's words, not settings, and nothing is written
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
        else:
            _hydra_main(context)
    except HydraException as exc:
        if full_error:
            raise  # the user asked for Hydra's whole story
        # the first paragraph says what is wrong; the rest lists search paths and the like
        said = " ".join(line.strip() for line in str(exc).strip().split("\n\n")[0].splitlines())
        _fail(said or type(exc).__name__)
    except BrokenProcessPool:
        # a worker of a parallel sweep was killed (the out-of-memory killer, kill -9): joblib
        # gives the other jobs up
        print(
            "paraeval: error: the sweep stopped: one of its worker processes was killed (out of "
            "memory? kill -9?); the jobs finished before it keep their folders and MLflow runs",
            file=sys.stderr,
        )
        sys.exit(1)


def _help(context: RunContext) -> None:
    """Hydra's help fitted to 100 columns (it prints a group's options on one line)."""
    buffer = io.StringIO()
    try:
        with redirect_stdout(buffer):
            _hydra_main(context)
    finally:
        sys.stdout.write(fit(buffer.getvalue()))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
