"""Screenshots of MLflow's UI on a paraeval run: the experiment page, the parent run's page and the
compare page of its system runs, taken by headless Chromium from an ``mlflow server`` started on
127.0.0.1 at a free port (stopped at the end, however the script ends).

Usage: ``python scripts/mlflow_screenshots.py OUT_FOLDER [--store-dir DIR] [--chromium PATH]``

Without ``--store-dir`` the embedded demo is run first (``tracking.store_dir`` in a temporary
folder); with it, the newest paraeval run of ``DIR/mlflow.db`` is shown. Writes
``experiment.png``, ``run.png`` and ``compare.png`` into OUT_FOLDER and prints their paths. Nothing
leaves the machine: the server listens on 127.0.0.1 and Chromium runs without its background
services.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

WINDOW = "1400,1000"
# the run page is long: its description comes after the run's details, datasets and tags
TALL = {"run": "1400,2400"}
STARTUP_TIMEOUT_S = 120.0
RENDER_BUDGET_MS = 20_000  # virtual time Chromium gives the page's scripts before the shot
MACHINE_LEARNING = "machine_learning"
OFFLINE = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_store(work: Path) -> Path:
    """Run the embedded demo, logged to an SQLite store in ``work``; the store's folder."""
    store = work / "mlflow"
    command = [sys.executable, "-m", "paraeval", f"tracking.store_dir={store}"]
    command += [f"hydra.run.dir={work / 'out'}", "report.print_tables=false"]
    subprocess.run(command, check=True, cwd=work, env={**os.environ, **OFFLINE})
    return store


@contextmanager
def mlflow_server(store: Path, log: Path) -> Iterator[str]:
    """``mlflow server`` on the store's SQLite database; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{store.resolve() / 'mlflow.db'}"]
    with log.open("w") as out:
        env = {**os.environ, **OFFLINE}
        env.pop("MLFLOW_TRACKING_URI", None)
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while not _healthy(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"mlflow server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.5)
            yield url
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait(timeout=10)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def pages(url: str) -> dict[str, str]:
    """The UI addresses of the newest paraeval run: its experiment, the run, its systems
    compared."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    runs = [
        run
        for exp in client.search_experiments()
        for run in client.search_runs(
            [exp.experiment_id],
            filter_string="tags.`paraeval.role` = 'invocation'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
    ]
    if not runs:
        raise SystemExit("no paraeval run in this store")
    parent = max(runs, key=lambda r: r.info.start_time)
    exp_id, run_id = parent.info.experiment_id, parent.info.run_id
    children = client.search_runs([exp_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'")
    compare = urllib.parse.urlencode(
        {
            "runs": json.dumps([c.info.run_id for c in children]),
            "experiments": json.dumps([exp_id]),
        }
    )
    # MLflow 3.17's UI keeps a "workflow type" of its own (GenAI by default, in the browser's
    # local storage or the address's workflowType): a fresh browser opens every experiment on
    # the GenAI overview unless the address asks for model training
    ml = f"workflowType={MACHINE_LEARNING}"
    return {
        "experiment": f"{url}/#/experiments/{exp_id}?{ml}",
        "run": f"{url}/#/experiments/{exp_id}/runs/{run_id}?{ml}",
        "compare": f"{url}/#/compare-runs?{compare}&{ml}",
    }


def screenshot(chromium: str, address: str, png: Path, profile: Path, window: str = WINDOW) -> None:
    command = [
        chromium,
        "--headless",
        "--no-sandbox",  # as root in a container, Chromium refuses to start otherwise
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={RENDER_BUDGET_MS}",
        f"--window-size={window}",
        f"--screenshot={png}",
        address,
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    if not png.is_file() or png.stat().st_size == 0:
        raise SystemExit(f"Chromium wrote no screenshot of {address}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="folder for the PNG files")
    p.add_argument("--store-dir", type=Path, help="folder of mlflow.db (default: run the demo)")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="paraeval-screens-") as tmp:
        work = Path(tmp)
        store = args.store_dir or demo_store(work)
        with mlflow_server(store, work / "server.log") as url:
            for name, address in pages(url).items():
                png = args.out / f"{name}.png"
                window = TALL.get(name, WINDOW)
                screenshot(args.chromium, address, png, work / "chromium", window)
                print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
