"""What a run keeps and what it concludes: the typed record of a case (``record``), the run folder
and its files (``files``, ``outdir``, ``load``, ``merge``), the summary (``summary``), and the
statistics and gates (``stats``, ``resample``, ``metrics``, ``pairing``, ``gates``, ``compare``),
and the sample size a gate needs (``sample_size``).

The front ends (``cli``, ``run``, ``pytest_layer``) use the names below; the modules behind them
may be reorganised without touching a caller. Nothing here formats for people: that is
``sab_pytest.reports``, which reads this package and is never read by it.
"""

from sab_pytest.results.compare import compare_runs, render_text
from sab_pytest.results.files import RESULTS_NAME, SUMMARY_NAME, Redactor, json_line, read_results
from sab_pytest.results.gates import Gate, parse_gate
from sab_pytest.results.load import Run, load_run, setting_differences, settings_of
from sab_pytest.results.merge import exit_status, merge, read_run
from sab_pytest.results.pairing import judged_cases, too_few
from sab_pytest.results.record import (
    CaseMeta,
    StoredRecord,
    case_meta,
    crashed,
    error_kind,
    failed,
    filtered,
    from_verdict,
    sample_id,
    split_sample_id,
    stamped,
)
from sab_pytest.results.sample_size import no_regression_size, threshold_size
from sab_pytest.results.summary import RunStatus, Summary, build_summary, run_status

__all__ = [
    "RESULTS_NAME", "SUMMARY_NAME", "CaseMeta", "Gate", "Redactor", "Run", "RunStatus", "StoredRecord", "Summary",
    "build_summary", "case_meta", "compare_runs", "crashed", "error_kind", "exit_status", "failed", "filtered",
    "from_verdict",
    "json_line", "judged_cases", "load_run", "merge", "no_regression_size", "parse_gate", "read_results", "read_run",
    "render_text", "run_status", "sample_id", "setting_differences", "settings_of", "split_sample_id", "stamped",
    "threshold_size", "too_few",
]
