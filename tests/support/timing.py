"""How the tests speak of time.

They assert what happened (which requests were made and when the server got them, which error
was raised, what was left running), not how fast it happened: speed is shown by the scripts in
``bench/``, which print their figures. Where a test must tell "gave up at once" from "waited for the
long thing", the long thing is made much longer than ``HANG_S`` and the test asserts ``< HANG_S``:
a bound that only a hang can exceed, on any machine and under any load.
"""

HANG_S = 15.0
#: a wait the code under test must cut short: far beyond HANG_S
LONG_S = 120.0
