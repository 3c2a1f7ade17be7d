"""Four shards merged give the metrics of one run, to the last digit.

Runs the benchmark once whole and once as ``--sab-shard 1/4`` .. ``4/4`` (each a separate pytest
process, as CI jobs would be), merges the four with ``sab merge``, and prints every
overall metric of both side by side with ``repr`` (all digits), then whether the full metric trees
(overall, per category, per level) are identical and the wall time of each part.

Every run must end (exit 0 or 1) and record its cases, the merge must succeed and hold every case, and
the metric trees must be identical; else the bench exits 1. ``--smoke``: 12 cases of the mixed subset in
2 shards, -n 0.

Usage::

    SAB_DATA=... SAB_THOR_SCENES=... python bench/bench_shards.py [--subset all] [-n 2] [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import Checks, add_smoke  # noqa: E402


def _pytest(out: Path, subset: str, workers: str, extra: list[str], *args: str, checks: Checks) -> float:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--sab-subset={subset}",
                           f"--sab-out={out}", "-n", workers, *extra, *args], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    checks.need(done.returncode in (0, 1) and (out / "sab-summary.json").exists(),
                f"the run {' '.join(args) or 'whole'} ended and wrote its summary (exit {done.returncode}; "
                f"{done.stdout.strip()[-200:]!r})")
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subset", default="all", help="--sab-subset of the runs (default all: 1050 cases)")
    parser.add_argument("-n", default="2", help="xdist workers per run (default 2)")
    parser.add_argument("--shards", type=int, default=4, help="shards of the selection (default 4)")
    parser.add_argument("extra", nargs="*", help="more pytest arguments for every run (after --)")
    add_smoke(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.subset, args.n, args.extra, args.shards = "mixed", "0", [*args.extra, "--sab-sample=12"], 2
    checks = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        whole_s = _pytest(base / "whole", args.subset, args.n, args.extra, checks=checks)
        shard_s = [_pytest(base / f"s{k}", args.subset, args.n, args.extra, f"--sab-shard={k}/{args.shards}",
                           checks=checks) for k in range(1, args.shards + 1)]
        t = time.perf_counter()
        merged = subprocess.run([sys.executable, "-m", "sab_pytest", "merge",
                                 *(str(base / f"s{k}") for k in range(1, args.shards + 1)), "--sab-out",
                                 str(base / "merged")],
                                capture_output=True, text=True, check=False)
        merge_s = time.perf_counter() - t
        if not (base / "merged" / "sab-summary.json").exists():
            print(merged.stderr, file=sys.stderr)
            checks.need(False, f"sab merge wrote the merged summary (exit {merged.returncode})")
            return checks.status()
        one = json.loads((base / "whole" / "sab-summary.json").read_text())
        four = json.loads((base / "merged" / "sab-summary.json").read_text())
    print(f"subset {args.subset}: {one['cases']} cases whole, {four['cases']} merged from {args.shards} shards "
          f"({', '.join(str(m['cases']) for m in four['merged_from'])})")
    print(f"{'metric':<38}{'one run':<24}{f'{args.shards} shards merged':<24}")
    for name, entry in one["metrics"].items():
        other = four["metrics"].get(name, {})
        print(f"{name:<38}{entry.get('value')!r:<24}{other.get('value')!r:<24}"
              f"{'' if entry == other else 'DIFFERS'}")
    identical = one["metrics_full"] == four["metrics_full"]
    print(f"full metric trees identical (overall, categories, levels, counts, intervals): {identical}")
    print(f"wall time: whole {whole_s:.1f} s; shards {', '.join(f'{s:.1f}' for s in shard_s)} s; "
          f"merge {merge_s:.2f} s; merge exit status {merged.returncode}")
    checks.need(one["cases"] > 0 and four["cases"] == one["cases"],
                f"the merge holds every case of the whole run ({four['cases']} of {one['cases']})")
    checks.need(identical, "the full metric trees of the whole run and the merged shards are identical")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
