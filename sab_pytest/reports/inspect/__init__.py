"""A run as an Inspect eval log, for ``inspect view`` and ``inspect_ai.analysis``: ``log`` writes a
finished run whole, ``live`` feeds a writer process while the cases run, ``sample`` turns one record
into an Inspect sample. inspect_ai is an optional dependency, imported only here."""
