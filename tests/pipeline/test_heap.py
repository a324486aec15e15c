"""``release_free_memory``: freed arrays that lie between arrays still in use stay in the
process's resident set until the heap's free pages are given back; a Ray actor does that after
each bundle, a run between its stages."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# in a thread of its own (its own heap, as Ray Data's calls of an actor): 8,000 arrays of 40 kB
# (below glibc's mmap threshold: in the heap), every 50th kept, so that no free page is at the
# heap's top, which glibc would give back by itself; prints RssAnon (MB) after the frees and
# after release_free_memory
PROGRAM = textwrap.dedent(
    """
    import threading
    import numpy as np
    from paraeval.pipeline.lifetime import release_free_memory

    def rss_anon():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon"):
                return int(line.split()[1]) / 1024

    def work(out):
        arrays = [np.ones(10_000, dtype=np.float32) for _ in range(8_000)]
        kept = arrays[::50]
        del arrays
        before = rss_anon()
        release_free_memory()
        out.extend([before, rss_anon(), len(kept)])

    out = []
    thread = threading.Thread(target=work, args=(out,))
    thread.start()
    thread.join()
    print(out[0], out[1])
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim: Linux")
def test_free_pages_between_arrays_in_use_leave_the_resident_set() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True, timeout=120
    )
    before, after = map(float, proc.stdout.split())
    # 320 MB were allocated and 314 MB of it freed; the heap held it until the trim
    assert before - after > 250, (before, after)
