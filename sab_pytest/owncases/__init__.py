"""A team's own cases beside the paper's (docs/own-cases.md): ``*.sab.yaml`` / ``*.sab.jsonl`` files.

``files`` reads them (every key with its line) and makes their ``Case``s, ``check`` validates them all
at once (``file:line`` for each problem, the reference steps run on the embedded engine), and
``selection`` is what a run does with them before its first case. Plain Python: ``sab cases check``
uses them without pytest; the pytest layer only collects the files (``pytest_layer.collection``).
"""
