"""Tracking backends that fail: a server answering 500, a half-created SQLite store, artifacts
of a ``sqlite:///`` URI. Real servers (a tiny local ``http.server``) and real SQLite stores."""

from __future__ import annotations

import http.server
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from paraeval.pipeline.track import TrackingUnavailable, check_reachable
from paraeval.pipeline.tracking import MLflowTracker
from tests.pipeline.test_tracking import _output_dir, _record


class _Handler(http.server.BaseHTTPRequestHandler):
    healthy = False  # True: /health answers 200, everything else 500

    def _answer(self) -> None:
        if self.healthy and self.path.startswith("/health"):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"OK")
            return
        body = b"Internal Server Error"
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve(healthy: bool) -> Iterator[str]:
    handler = type("H", (_Handler,), {"healthy": healthy})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def failing_server() -> Iterator[str]:
    yield from _serve(healthy=False)


@pytest.fixture
def api_failing_server() -> Iterator[str]:
    yield from _serve(healthy=True)


def test_health_check_reads_the_status(failing_server: str) -> None:
    start = time.perf_counter()
    with pytest.raises(TrackingUnavailable, match="answers HTTP 500") as info:
        check_reachable(failing_server)
    assert time.perf_counter() - start < 5
    assert str(info.value) == (
        f"MLflow tracking server {failing_server} answers HTTP 500 Internal Server Error"
    )


def test_server_answering_500_is_handled_like_an_unreachable_one(
    failing_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = _output_dir(tmp_path / "out")
    tracker = MLflowTracker(uri=failing_server)
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        assert tracker.log(out, _record(tracker)) is None
    assert time.perf_counter() - start < 5
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0] == (
        f"MLflow tracking server {failing_server} answers HTTP 500 Internal Server Error; "
        f"outputs kept in {out}; log them later with: paraeval-log {out}"
    )
    assert (out / "run_info.json").is_file()


def test_server_whose_api_fails_gives_up_within_seconds(
    api_failing_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """/health is fine but every API call answers 500: MLflow's client retries are bounded."""
    out = _output_dir(tmp_path / "out")
    tracker = MLflowTracker(uri=api_failing_server)
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        assert tracker.log(out, _record(tracker)) is None
    elapsed = time.perf_counter() - start
    assert elapsed < 30, elapsed  # unbounded: 7 retries with exponential back-off, minutes
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("MLflow logging failed (")
    assert f"outputs kept in {out}; log them later with: paraeval-log {out}" in warnings[0]
