"""The encoder's precision: fp32, TF32 matrix products on CUDA, or a half type that runs only where
it pays. Half precision is autocast (weights and layer norms stay float32), and transformers'
SDPA attention with a padding mask can be slower in a half type than in float32 on some devices
and versions: each attention path is timed on the run's first batch rather than assumed."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from paraeval.metrics.base import MetricConfigError

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
HALF = ("bf16", "fp16")


def check_precision(precision: str, metric: str = "") -> str:
    """The precision setting, checked (one of :data:`PRECISIONS`)."""
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
    if precision in HALF:
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


HALF_PAYS = 1.5  # how much faster than fp32 a half precision must run to be used
ATTENTIONS = ("sdpa", "eager")  # transformers' attention paths a half precision is timed with


def precision_verdict(
    precision: str, half_s: float, fp32_s: float, attention: str = "sdpa", pays: float = HALF_PAYS
) -> tuple[int, str, bool]:
    """(log level, message, whether it pays) of a half precision timed against fp32 on one batch:
    one that is not ``pays`` times faster is a warning, and fp32 runs instead (on some devices and
    attention paths half precision is slower)."""
    figures = (
        f"one batch took {half_s:.3f} s at {precision} ({attention} attention) against "
        f"{fp32_s:.3f} s at fp32"
    )
    if half_s * pays > fp32_s:
        return (
            logging.WARNING,
            f"precision={precision} does not pay on this device ({figures}; it must be {pays}x "
            "faster): running fp32, and the signatures say so",
            False,
        )
    return logging.INFO, f"precision={precision} pays on this device ({figures})", True


def choose_precision(
    model: Any, forward: Callable[[], object], precision: str, device: str, pays: float
) -> bool:
    """Whether the half ``precision`` pays: ``forward`` (a batch) timed at fp32 and at
    ``precision`` with each of transformers' attention paths (``set_attn_implementation``); the
    fastest path is kept where it pays (:func:`precision_verdict`), else the default one. A time
    is the best of two calls after an untimed one (a kernel's first call pays for its setup)."""
    import torch

    def best_time(precision: str) -> float:
        times = []
        for _ in range(3):
            with precision_context(precision, device):
                start = time.perf_counter()
                forward()
                if str(device).startswith("cuda"):
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
        return min(times[1:])

    fp32_s = best_time("fp32")
    timed: dict[str, float] = {}
    for attention in ATTENTIONS:
        with contextlib.suppress(ValueError, ImportError):  # a path the model lacks
            model.set_attn_implementation(attention)
            timed[attention] = best_time(precision)
    attention = min(timed, key=timed.__getitem__)
    level, message, paid = precision_verdict(precision, timed[attention], fp32_s, attention, pays)
    log.log(level, "%s", message)
    with contextlib.suppress(ValueError, ImportError):
        model.set_attn_implementation(attention if paid else ATTENTIONS[0])
    return paid
