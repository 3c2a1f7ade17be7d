"""What people read of a run: the terminal table (``table``), JUnit properties (``junit``), the
HTML report (``html``) and Inspect eval logs (``inspect``).

Every report reads the kept records, the summary and the statistics of ``sab_pytest.results`` and
computes no number of its own, so a report can change without moving a metric or a gate.
"""
