"""A fault campaign: each fault as a user meets it, then ``--sab-resume`` under healthy conditions.

Every scenario runs ``sab run -n 2`` from a fresh directory on a stratified sample
of the mixed subset (``--sab-sample``, default 40) with a model on the project's fake OpenAI server
(a short plan per answer, 50 ms each, the rule judge), injects one fault, and then runs the same
command with ``--sab-resume`` on a healthy setup. It prints one row per fault:

* ``exit``: the faulted run's exit status (0 ok, 1 cases failed, 2 stopped/interrupted, 4 usage);
* ``message``: the line that tells the user what happened (first match of a few known prefixes);
* ``time``: the faulted run's wall time;
* ``lost``: verdicts that reached the results file whole in the faulted run and are missing or
  different after the resume (must be 0);
* ``mixed``: records after the resume that belong to another run (``run_id`` not the summary's)
  or to a case outside the selection (must be 0);
* ``done``: cases with a verdict after the resume, of the selection.

It exits 1 when a verdict was lost, a record mixed in, or a resume did not finish every case of the
selection. ``--smoke``: the HTTP 500 fault alone, on 16 cases, -n 0.

    SAB_DATA=... SAB_THOR_SCENES=... python bench/bench_faults.py [--sample 40] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import Checks, add_smoke  # noqa: E402

from sab_pytest import dataset  # noqa: E402
from sab_pytest.results.files import RESULTS_NAME, SUMMARY_NAME, read_results  # noqa: E402
from sab_pytest.testing import FakeOpenAIServer, Reply  # noqa: E402

WORKERS = ["2"]  # -n of every run (--smoke: 0)
PLAN = "1. find Apple\n2. pick Apple\n3. find Fridge\n4. open Fridge\n5. put Fridge\n6. close Fridge"
#: the lines that tell a user what happened, most telling first
MESSAGES = [re.compile(p) for p in (r"^INTERNALERROR", r"^sab: error", r"^ERROR:", r"^sab: exit status 2",
                                    r"^run STOPPED",
                                    r"^sab \w+:", r"^sab: (note|warning)", r"^!.*Interrupted",
                                    r"KeyboardInterrupt", r"Traceback")]


@dataclass
class Run:
    code: int
    output: str
    seconds: float

    def message(self) -> str:
        lines = [line.strip() for line in self.output.splitlines()]
        found = next((line for pattern in MESSAGES for line in lines if pattern.search(line)), None)
        return (found or (lines[-1] if lines else ""))[:110]


@dataclass
class Scenario:
    name: str
    sample: int
    server: FakeOpenAIServer
    work: Path
    extra: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return self.work / "out"

    def args(self, *more: str) -> list[str]:
        return [sys.executable, "-m", "sab_pytest", "run", "-n", WORKERS[0],
                f"--sab-sample={self.sample}", "--model=agent", "--judge-model=rules", "--sab-no-cache",
                f"--sab-out={self.out}", "--sab-timeout=5", "--sab-max-failures=5", *self.extra, *more]

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env.update(OPENAI_BASE_URL=self.server.url, OPENAI_API_KEY="fake-key", **self.env)
        return env

    def run(self, *more: str, when: Callable[[], bool] | None = None, then: Callable[[subprocess.Popen], None]
            | None = None, argv: list[str] | None = None, timeout: float = 300) -> Run:
        """The command (``argv`` or the benchmark run); ``then(proc)`` once ``when()`` holds."""
        start = time.monotonic()
        proc = subprocess.Popen(argv or self.args(*more), cwd=self.work, env=self.environ(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        chunks: list[str] = []
        reader = threading.Thread(target=lambda: chunks.extend(proc.stdout or []), daemon=True)
        reader.start()
        fired = when is None
        while proc.poll() is None and time.monotonic() - start < timeout:
            if not fired and when is not None and when():
                fired = True
                if then is not None:
                    then(proc)
            time.sleep(0.05)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # a worker left behind by a killed controller
        reader.join(5)
        return Run(proc.returncode, "".join(chunks), time.monotonic() - start)

    def lines(self) -> int:
        try:
            return (self.out / RESULTS_NAME).read_bytes().count(b"\n")
        except OSError:
            return 0

    def after_lines(self, n: int) -> Callable[[], bool]:
        return lambda: self.lines() >= n


def verdicts(path: Path) -> dict[str, dict]:
    """Whole, non-error records of a results file by case id (the last one of a case wins)."""
    if path.is_symlink() or not path.is_file():  # /dev/full reads as endless zeros
        return {}
    try:
        records = read_results(path)
    except Exception:
        return {}
    return {r["case"]["id"]: r for r in records if not r.get("error")}


def workers_of(pid: int) -> list[int]:
    """The controller's child processes (the xdist workers)."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def thor_server() -> Iterator[tuple[subprocess.Popen, str]]:
    port = free_port()
    scenes = ["--thor-scenes", os.environ["SAB_THOR_SCENES"]] if os.environ.get("SAB_THOR_SCENES") else []
    proc = subprocess.Popen([sys.executable, "-m", "sab_pytest", "thor-server", "--backend", "sim", "--port", str(port),
                             "--engines", "2", *scenes], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    assert proc.stdout is not None and "listening on" in proc.stdout.readline()
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def after_n_requests(server: FakeOpenAIServer, n: int, reply: Reply) -> None:
    """After ``n`` chat requests (the preflight counts too), ``reply``. Counted here: a rule's test
    runs under the server's lock, so it must not read ``server.chat_requests``."""
    seen = itertools.count(1)
    server.add_rule(reply, match=lambda _r: next(seen) > n)


# -- the faults: each gets a fresh Scenario, returns the faulted run (the resume is common) -----------------

def sigint(s: Scenario) -> Run:
    return s.run(when=s.after_lines(8), then=lambda p: os.kill(p.pid, signal.SIGINT))


def sigterm(s: Scenario) -> Run:
    return s.run(when=s.after_lines(8), then=lambda p: os.kill(p.pid, signal.SIGTERM))


def kill_worker(s: Scenario) -> Run:
    def kill(proc: subprocess.Popen) -> None:
        for pid in workers_of(proc.pid)[:1]:
            os.kill(pid, signal.SIGKILL)
    return s.run(when=s.after_lines(8), then=kill)


def kill_controller(s: Scenario) -> Run:
    return s.run(when=s.after_lines(8), then=lambda p: os.kill(p.pid, signal.SIGKILL))


def endpoint_500(s: Scenario) -> Run:
    after_n_requests(s.server, 12, Reply.error(500, "backend down"))
    return s.run()


def endpoint_drops(s: Scenario) -> Run:
    after_n_requests(s.server, 12, Reply.dropped())
    return s.run()


def endpoint_hangs(s: Scenario) -> Run:
    after_n_requests(s.server, 12, Reply.slow(3600))
    return s.run()


def endpoint_garbage(s: Scenario) -> Run:
    after_n_requests(s.server, 12, Reply.invalid_json())
    return s.run()


def endpoint_dies(s: Scenario) -> Run:
    """The server process goes away mid-run (it comes back on the same address for the resume)."""
    return s.run(when=lambda: len(s.server.chat_requests) > 12, then=lambda _p: s.server.stop())


def rate_limited(s: Scenario) -> Run:
    count = [0]

    def limited(_request: object) -> bool:
        count[0] += 1
        return count[0] % 3 != 0
    s.server.add_rule(Reply.rate_limited(retry_after=1), match=limited)
    return s.run()


def disk_full(s: Scenario) -> Run:
    s.out.mkdir(parents=True)
    (s.out / RESULTS_NAME).symlink_to("/dev/full")
    return s.run()


def size_limit(s: Scenario) -> Run:
    command = " ".join(f"'{a}'" for a in s.args())
    return s.run(argv=["bash", "-c", f"ulimit -f 24; exec {command}"])


def out_is_a_file(s: Scenario) -> Run:
    """``--sab-out`` names an existing file: refused before any case (the resume then uses a directory)."""
    s.out.write_text("not a directory")
    return s.run()


def torn_tail(s: Scenario) -> Run:
    done = s.run()
    path = s.out / RESULTS_NAME
    data = path.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last + (len(data) - last) // 2])  # cut inside the last record
    return done


def torn_between(s: Scenario) -> Run:
    done = s.run()
    path = s.out / RESULTS_NAME
    data = path.read_bytes()
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1][:-1])  # the last newline of a whole record lost
    return done


def two_runs(s: Scenario) -> Run:
    s.server.latency = 0.3
    second: list[Run] = []
    first = s.run(when=s.after_lines(2), then=lambda _p: second.append(s.run()))
    s.server.latency = 0.05
    return Run(second[0].code, second[0].output, second[0].seconds) if second else first


def stale_lock(s: Scenario) -> Run:
    s.out.mkdir(parents=True)
    (s.out / "sab-run.lock").write_text(json.dumps({"run_id": "dead", "pid": 4000000, "host": "gone", "started": 0}))
    return s.run()


def mixed_pair(s: Scenario) -> Run:
    s.run()
    other = s.work / "other"
    s.run(f"--sab-out={other}", "--sab-seed=7")
    shutil.copy(other / SUMMARY_NAME, s.out / SUMMARY_NAME)
    return s.run(argv=[sys.executable, "-m", "sab_pytest", "report", str(s.out), "--out", str(s.work / "r.html")])


def space_spelled(s: Scenario) -> Run:
    """``--sab-out DIR`` with a space, to a directory that does not exist yet, from a directory with
    an ini file of its own: ``sab run`` fixes its rootdir and ini file, so the
    workers collect the same cases."""
    command = s.args()
    index = next(i for i, a in enumerate(command) if a.startswith("--sab-out="))
    command[index:index + 1] = ["--sab-out", str(s.out)]
    (s.work / "pytest.ini").write_text("[pytest]\ntestpaths = nowhere\n")
    return s.run(argv=command)


def thor_killed(s: Scenario) -> Run:
    with thor_server() as (proc, url):
        s.extra = ["--thor=remote", f"--thor-url={url}"]
        return s.run(when=s.after_lines(6), then=lambda _p: proc.kill())


def log_without_inspect_ai(s: Scenario) -> Run:
    hidden = s.work / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text(
        "import sys\nclass _H:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'inspect_ai':\n            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, _H())\n")
    s.env = {"PYTHONPATH": str(hidden)}
    try:
        return s.run(f"--sab-inspect-log={s.work / 'run.eval'}")
    finally:
        s.env = {}


def bad_option(s: Scenario) -> Run:
    return s.run("--sab-sample=0")


def missing_data(s: Scenario) -> Run:
    return s.run(f"--sab-data={s.work / 'nowhere'}")


FAULTS: dict[str, Callable[[Scenario], Run]] = {
    "SIGINT to the controller": sigint, "SIGTERM to the controller": sigterm,
    "kill -9 of a worker": kill_worker, "kill -9 of the controller": kill_controller,
    "endpoint: HTTP 500 mid-run": endpoint_500, "endpoint: drops connections": endpoint_drops,
    "endpoint: hangs mid-run": endpoint_hangs, "endpoint: invalid JSON": endpoint_garbage,
    "endpoint: process gone": endpoint_dies, "endpoint: 429 on 2 of 3": rate_limited,
    "disk full (ENOSPC)": disk_full, "file size limit (EFBIG)": size_limit,
    "--sab-out is a file": out_is_a_file, "torn last record": torn_tail,
    "torn: newline lost": torn_between, "two runs, one --sab-out": two_runs,
    "lock left by a dead run": stale_lock, "report on a mixed pair": mixed_pair,
    "space-spelled --sab-out, new dir": space_spelled, "THOR server killed": thor_killed,
    "--sab-inspect-log without inspect_ai": log_without_inspect_ai, "bad option value": bad_option,
    "missing dataset": missing_data,
}


def score(before: dict[str, dict], after_all: list[dict], summary: dict, wanted: set[str]) -> tuple[int, int, int]:
    """(verdicts lost, records mixed in from another run or case, cases with a verdict) after the resume."""
    after = {r["case"]["id"]: r for r in after_all}

    def same(cid: str, r: dict) -> bool:
        return cid in after and (after[cid]["passed"], after[cid]["message"]) == (r["passed"], r["message"])

    lost = sum(1 for cid, r in before.items() if not same(cid, r))
    mixed = sum(1 for r in after_all if r.get("run_id") != summary.get("run_id") or r["case"]["id"] not in wanted)
    done = sum(1 for cid, r in after.items() if cid in wanted and not r.get("error"))
    return lost, mixed, done


def campaign(names: list[str], sample: int) -> list[dict]:
    rows = []
    wanted = {c.id for c in dataset.select(dataset.load(), "mixed", sample=sample)}
    for name in names:
        with tempfile.TemporaryDirectory(prefix="sab-fault-") as tmp, FakeOpenAIServer(latency=0.05) as server:
            server.default = Reply(content=PLAN)
            s = Scenario(name, sample, server, Path(tmp))
            port = server.port
            faulted = FAULTS[name](s)
            before = verdicts(s.out / RESULTS_NAME)
            server.reset()
            server.default, server.latency = Reply(content=PLAN), 0.05
            if server._server is None:  # stopped by the fault: serve again, at the same address
                server._port = port
                server.start()
            if name == "THOR server killed":
                with thor_server() as (_proc, url):
                    s.extra = ["--thor=remote", f"--thor-url={url}"]
                    resumed = s.run("--sab-resume")
            else:
                if name == "disk full (ENOSPC)":
                    (s.out / RESULTS_NAME).unlink()
                if name == "--sab-out is a file":
                    s.out.unlink()
                if name == "space-spelled --sab-out, new dir":
                    (s.work / "pytest.ini").unlink()
                resumed = s.run("--sab-resume")
            after_all = read_results(s.out / RESULTS_NAME) if (s.out / RESULTS_NAME).is_file() else []
            summary = json.loads((s.out / SUMMARY_NAME).read_text()) if (s.out / SUMMARY_NAME).is_file() else {}
            lost, mixed, done = score(before, after_all, summary, wanted)
            if done < len(wanted):  # say why the resume did not finish the run
                print("  resume:", resumed.code, "|", "\n  ".join(resumed.output.strip().splitlines()[-6:]), flush=True)
            rows.append({"fault": name, "exit": faulted.code, "message": faulted.message(), "time_s": faulted.seconds,
                         "kept": len(before), "lost": lost, "mixed": mixed, "done": done, "of": len(wanted),
                         "resume_exit": resumed.code})
            print(f"{name:<32} exit {faulted.code:<2} {faulted.seconds:6.1f} s  kept {len(before):>3}  lost {lost}  "
                  f"mixed {mixed}  done {done}/{len(wanted)}  | {faulted.message()}", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--only", nargs="*", choices=sorted(FAULTS), metavar="NAME")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.only, args.sample, WORKERS[0] = ["endpoint: HTTP 500 mid-run"], 16, "0"
    rows = campaign(args.only or list(FAULTS), args.sample)
    print()
    print("| fault | exit | message | time | kept | lost | mixed | done after resume |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['fault']} | {r['exit']} | {r['message'].replace('|', '/')} | {r['time_s']:.1f} s | {r['kept']} | "
              f"{r['lost']} | {r['mixed']} | {r['done']}/{r['of']} |")
    total_lost, total_mixed = sum(r["lost"] for r in rows), sum(r["mixed"] for r in rows)
    print(f"\n{len(rows)} faults: verdicts lost {total_lost}, cases mixed from another run {total_mixed}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    checks = Checks()
    checks.need(rows and total_lost == 0, f"no verdict lost ({total_lost})")
    checks.need(total_mixed == 0, f"no record of another run or case mixed in ({total_mixed})")
    for r in rows:
        checks.need(r["resume_exit"] in (0, 1) and r["done"] == r["of"],
                    f"{r['fault']}: the resume finished the {r['of']} cases (exit {r['resume_exit']}, "
                    f"{r['done']} done)")
    return checks.status()


if __name__ == "__main__":
    sys.exit(main())
