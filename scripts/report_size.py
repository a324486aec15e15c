"""How tall ParaBank-Eval's report.html is at 1,400 px wide (at most 12,000 px by default).

Usage: ``python scripts/report_size.py [--out DIR] [--page REPORT_HTML] [--limit 12000]``

Runs ``paraeval data=parabank tracking=none`` (all 36 systems, 400 items, the default metrics)
into ``--out`` unless ``--page`` names a page already written, then lays the page out in headless
Chromium 1,400 × 1,000 and prints its height, its widest element and whether every figure
decoded. Exit code 1 when the page is taller than ``--limit``, wider than the window, or a figure
did not decode. Needs ParaBank-Eval under ``$PARAEVAL_SHARED_DATA`` and Chromium on ``PATH``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WIDTH, HEIGHT = 1400, 1000
MEASURE = """<script>
window.addEventListener('load', function () {
  var doc = document.documentElement, widest = 0;
  document.querySelectorAll('body *').forEach(function (e) {
    widest = Math.max(widest, e.getBoundingClientRect().right);
  });
  var imgs = Array.from(document.querySelectorAll('img'));
  var out = document.createElement('pre');
  out.id = 'report-size';
  out.textContent = JSON.stringify({
    height: doc.scrollHeight, width: doc.clientWidth, scroll_width: doc.scrollWidth,
    widest: Math.round(widest), figures: imgs.length,
    decoded: imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length,
    answers: Math.round(document.getElementById('answers').getBoundingClientRect().top)});
  document.body.appendChild(out);
});
</script>"""


def run_parabank(out: Path) -> Path:
    paraeval = Path(sys.executable).with_name("paraeval")
    command = [str(paraeval), "data=parabank", "tracking=none", f"hydra.run.dir={out}"]
    command.append("report.print_tables=false")
    subprocess.run(command, check=True, cwd=out.parent)
    return out / "report.html"


def measure(page: Path) -> dict[str, int]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("Chromium is needed: make chromium installs it")
    with tempfile.TemporaryDirectory() as tmp:
        checked = Path(tmp) / "report.html"
        html = page.read_text(encoding="utf-8")
        checked.write_text(html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        flags += [f"--window-size={WIDTH},{HEIGHT}", "--hide-scrollbars"]
        flags += ["--virtual-time-budget=20000", "--dump-dom", checked.as_uri()]
        dom = subprocess.run(
            [browser, *flags], capture_output=True, text=True, timeout=300, check=True
        ).stdout
    found = re.search(r'<pre id="report-size">(.*?)</pre>', dom)
    if found is None:
        sys.exit("the page did not report its size")
    return dict(json.loads(found.group(1)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="run folder (default: a temporary one)")
    parser.add_argument("--page", type=Path, help="measure this report.html; no run")
    parser.add_argument("--limit", type=int, default=12_000, help="the tallest page that passes")
    args = parser.parse_args()
    if args.page is not None:
        page = args.page
    else:
        out = args.out or Path(tempfile.mkdtemp(prefix="report_size_")) / "parabank"
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        page = run_parabank(out.resolve())
    size = measure(page)
    print(f"{page}: {size['height']:,} px tall at {size['width']:,} px wide ({json.dumps(size)})")
    ok = size["height"] <= args.limit and size["scroll_width"] <= size["width"]
    ok = ok and size["decoded"] == size["figures"]
    if not ok:
        print(f"over the budget: at most {args.limit:,} px, no wider than the window, all decoded")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
