"""The supervisor fork server (roost.actors.supervisor.zygote): what a forked child starts with,
the code stamp that tells stale code, and the JSON-lines exchange."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import zmq

from roost.actors.supervisor import zygote

# Run in a fresh interpreter: a fork from the test process (threads of its own) proves nothing.
# The zygote's set-up, then two children of fork_supervisor whose target writes what it sees.
FORKS = r"""
import gc, json, os, random, secrets, signal, sys, time, uuid
from roost.actors.runtime import lean
lean.keep_out()
from roost.actors.supervisor import zygote

def status():
    fields = dict(line.split(":\t", 1) for line in open("/proc/self/status"))
    return {k: fields[k].strip() for k in ("SigBlk", "SigIgn", "SigCgt")}

plain = status()  # a fresh interpreter's
gc.disable()
zygote.preload()
gc.freeze()
signal.signal(signal.SIGCHLD, zygote.reap)
keep = os.open(os.devnull, os.O_RDONLY)  # a descriptor of the zygote's the child must not keep
signal.signal(signal.SIGUSR1, lambda *_: None)  # a handler of the zygote's the child must not keep

def seen(path):
    out = {
        "random": random.random(), "uuid": uuid.uuid4().hex, "secret": secrets.token_hex(8),
        "pid": os.getpid(), "sid": os.getsid(0), "pgid": os.getpgid(0),
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")
                      if os.path.exists(f"/proc/self/fd/{fd}")),  # not listdir's own
        "null": [os.readlink(f"/proc/self/fd/{fd}") for fd in (0, 1, 2)],
        "usr1": signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL,
        "chld": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
        "gc": gc.isenabled(), "frozen": gc.get_freeze_count(), **status(),
    }
    with open(path + ".tmp", "w") as fh:
        json.dump(out, fh)
    os.rename(path + ".tmp", path)

kids = [zygote.fork_supervisor(p, seen) for p in sys.argv[1:]]
deadline = time.monotonic() + 30
while not all(os.path.exists(p) for p in sys.argv[1:]) and time.monotonic() < deadline:
    time.sleep(0.02)
for _ in range(500):  # the SIGCHLD handler reaps them: none stays a zombie
    if not any(os.path.exists(f"/proc/{k}") for k in kids):
        break
    time.sleep(0.02)
print(json.dumps({"kids": kids, "zombies": [k for k in kids if os.path.exists(f"/proc/{k}")],
                  "me": os.getpid(), "fd": keep, "plain": plain}))
"""


def forked(tmp_path: Path, n: int = 2) -> tuple[dict[str, object], list[dict[str, object]]]:
    paths = [str(tmp_path / f"child{i}.json") for i in range(n)]
    out = subprocess.run(
        [sys.executable, "-c", FORKS, *paths], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), [json.loads(Path(p).read_text()) for p in paths]


def test_a_forked_child_starts_clean(tmp_path: Path) -> None:
    parent, children = forked(tmp_path)
    assert parent["zombies"] == []
    for child in children:
        assert child["sid"] == child["pid"] == child["pgid"]  # its own session and group
        assert child["fds"] == [0, 1, 2]  # the zygote's descriptors are gone
        assert child["null"] == [os.devnull] * 3
        assert child["usr1"] and child["chld"]  # no handler of the zygote's
        assert child["SigBlk"] == "0000000000000000"
        plain = parent["plain"]
        assert isinstance(plain, dict)
        assert (child["SigIgn"], child["SigCgt"]) == (plain["SigIgn"], plain["SigCgt"])
        assert child["gc"] is True and isinstance(child["frozen"], int) and child["frozen"] > 0


def test_each_child_has_its_own_randomness(tmp_path: Path) -> None:
    _, (a, b) = forked(tmp_path)
    for key in ("random", "uuid", "secret"):
        assert a[key] != b[key], key


def test_the_code_stamp_names_what_was_imported() -> None:
    zygote.preload()
    stamp = zygote.code_stamp()
    assert str(Path(zygote.__file__).with_name("actor.py")) in stamp
    assert zmq.__file__ in stamp  # a dependency: an upgrade of it is a change
    assert json.__file__ not in stamp  # the standard library is the interpreter's
    assert zygote.changed(stamp) is None


def test_a_file_rewritten_or_removed_is_a_change(tmp_path: Path) -> None:
    module = tmp_path / "mod.py"
    module.write_text("A = 1\n")
    st = module.stat()
    stamp = {str(module): (st.st_mtime_ns, st.st_size)}
    assert zygote.changed(stamp) is None
    module.write_text("A = 22\n")
    os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime, another size
    assert zygote.changed(stamp) == str(module)
    module.write_text("A = 1\n")
    os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # same size, another mtime
    assert zygote.changed(stamp) == str(module)
    module.unlink()
    assert zygote.changed(stamp) == str(module)


def test_a_request_without_a_spec_is_refused_and_stale_code_forks_nothing(tmp_path: Path) -> None:
    assert "error" in zygote.answer({}, {})
    gone = {str(tmp_path / "gone.py"): (1, 1)}
    assert zygote.answer({"spec": str(tmp_path / "spec")}, gone) == {
        "stale": f"changed on disk: {tmp_path / 'gone.py'}"
    }


def test_lines_are_read_whole_and_a_bad_line_is_an_empty_request() -> None:
    rfd, wfd = os.pipe()
    out_r, out_w = os.pipe()
    lines = zygote.Lines(rfd, out_w)
    os.write(wfd, b'{"spec": "/a"}\n{"sp')
    assert lines.read() == {"spec": "/a"}
    os.write(wfd, b'ec": "/b"}\nnot json\n[1]\n')
    assert lines.read() == {"spec": "/b"}
    assert lines.read() == {}
    assert lines.read() == {}
    os.close(wfd)
    assert lines.read() is None
    lines.write({"pid": 7})
    assert os.read(out_r, 100) == b'{"pid": 7}\n'
    for fd in (rfd, out_r, out_w):
        os.close(fd)
