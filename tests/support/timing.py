"""How the tests speak of time.

They assert what happened (which requests were made and when the server got them, which error
was raised, what was left running), not how fast it happened: speed is shown by the scripts in
``bench/``, which print their figures. Where a test must tell "gave up at once" from "waited for the
long thing", the long thing is made much longer than ``HANG_S`` and the test asserts ``< HANG_S``:
a bound that only a hang can exceed, on any machine and under any load.
"""

#: a thread, an event or a server on loopback (in this process) to get somewhere or answer
HANG_S = 15.0
#: a wait the code under test must cut short: far beyond HANG_S
LONG_S = 120.0
#: a child process (a Python interpreter, a pytest run, a server, a container tool) to get somewhere
#: or to end: starting an interpreter and importing the package alone takes seconds on a loaded
#: machine, so this is far beyond HANG_S; only a process that hangs reaches it
PROCESS_S = 120.0
#: building and installing a wheel: the heaviest thing a test waits for; only a hang reaches it
BUILD_S = 300.0
#: between two looks at a condition a test waits for (up to one of the bounds above): short, so the
#: test goes on soon after the condition holds; its length changes nothing a test asserts
POLL_S = 0.01
#: a moment given to other threads where the test cannot observe them: to get to where they block,
#: or a chance to do what they must not (start one call too many, go on after a stop). The tests
#: pay it on every run, so it is short; a longer one would change no outcome
SETTLE_S = 0.05
