"""Four shards merged give the metrics of one run, to the last digit.

Runs the benchmark once whole and once as ``--sab-shard 1/4`` .. ``4/4`` (each a separate pytest
process, as CI jobs would be), merges the four with ``sab merge``, and prints every
overall metric of both side by side with ``repr`` (all digits), then whether the full metric trees
(overall, per category, per level) are identical and the wall time of each part.

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


def _pytest(out: Path, subset: str, workers: str, extra: list[str], *args: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--sab-subset={subset}",
                    f"--sab-out={out}", "-n", workers, *extra, *args], cwd=ROOT, capture_output=True, check=False)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subset", default="all", help="--sab-subset of the runs (default all: 1050 cases)")
    parser.add_argument("-n", default="2", help="xdist workers per run (default 2)")
    parser.add_argument("extra", nargs="*", help="more pytest arguments for every run (after --)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        whole_s = _pytest(base / "whole", args.subset, args.n, args.extra)
        shard_s = [_pytest(base / f"s{k}", args.subset, args.n, args.extra, f"--sab-shard={k}/4") for k in range(1, 5)]
        t = time.perf_counter()
        merged = subprocess.run([sys.executable, "-m", "sab_pytest", "merge",
                                 *(str(base / f"s{k}") for k in range(1, 5)), "--sab-out", str(base / "merged")],
                                capture_output=True, text=True, check=False)
        merge_s = time.perf_counter() - t
        if not (base / "merged" / "sab-summary.json").exists():
            print(merged.stderr, file=sys.stderr)
            return 2
        one = json.loads((base / "whole" / "sab-summary.json").read_text())
        four = json.loads((base / "merged" / "sab-summary.json").read_text())
    print(f"subset {args.subset}: {one['cases']} cases whole, {four['cases']} merged from 4 shards "
          f"({', '.join(str(m['cases']) for m in four['merged_from'])})")
    print(f"{'metric':<38}{'one run':<24}{'4 shards merged':<24}")
    for name, entry in one["metrics"].items():
        other = four["metrics"].get(name, {})
        print(f"{name:<38}{entry.get('value')!r:<24}{other.get('value')!r:<24}"
              f"{'' if entry == other else 'DIFFERS'}")
    identical = one["metrics_full"] == four["metrics_full"]
    print(f"full metric trees identical (overall, categories, levels, counts, intervals): {identical}")
    print(f"wall time: whole {whole_s:.1f} s; shards {', '.join(f'{s:.1f}' for s in shard_s)} s; "
          f"merge {merge_s:.2f} s; merge exit status {merged.returncode}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
