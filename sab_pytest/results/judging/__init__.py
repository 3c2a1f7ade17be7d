"""The judges' error, measured by a human audit and corrected for: the audit's draw, label files and
report (``audit``), the statistics of a judge against people and of a corrected rate (``error``),
and the simulation that checks the corrected interval keeps its promise (``simulation``)."""
