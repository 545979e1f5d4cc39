"""The supervisor fork server (``python -m roost.actors.supervisor --zygote``, POSIX only).

A fresh interpreter per session costs every supervisor its own copy of everything it imports
(~17 MiB private, a third of a second of CPU). The zygote imports it all once, freezes the
garbage collector's view of it (``gc.freeze``: collections then never write to those objects'
headers, which would unshare their pages) and forks one supervisor per request; the children
share the imported pages copy-on-write, and go on sharing them after the zygote has gone.

It is a child of the node (``node/zygote.py``), speaking JSON lines on its stdin and stdout:
``{"ready": {...}}`` once, then a ``{"spec": path}`` request is answered ``{"pid": n}``,
``{"stale": why}`` (the code on disk is no longer the code it imported: it exits, and the node
starts a supervisor the usual way) or ``{"error": why}``. End of input (the node stopped or died)
ends it; its children live on. Nothing here starts a thread, an event loop or a ZeroMQ context:
a child makes its own after the fork. The zygote reaps its children as they exit (SIGCHLD), so
none lingers as a zombie while it runs; after it has gone they are init's, as a supervisor the
node started is once the node has gone.

In the child (``become_supervisor``): a new session and process group, stdio on ``/dev/null``
and every other descriptor closed, signal dispositions and mask as a fresh interpreter has them,
the collector enabled again; ``random`` reseeds itself at a fork (``uuid4`` and ``secrets`` read
the OS). The hash seed of str is the zygote's: it cannot change in a running interpreter.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import signal
import sys
import sysconfig
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from roost import __version__


def preload() -> None:
    """Import what a supervisor imports, at start-up and later, so no child imports after the
    fork (an import in a child is all private memory), and rehearse its event loop."""
    import ptyprocess  # noqa: F401  # the POSIX PTY backend imports it at the agent's launch

    import roost.actors.supervisor.actor  # noqa: F401

    rehearse()


def rehearse() -> None:
    """Run an event loop a few times, as every child will: the interpreter writes to code it
    runs the first times (3.11 specialises it), so done here it stays shared (~0.3 MiB a child).
    No executor, signal handler or subprocess: nothing that starts a thread."""
    import asyncio

    async def turns() -> None:
        for _ in range(20):
            await asyncio.sleep(0)

    for _ in range(10):
        asyncio.run(turns())


# -- the code it serves ---------------------------------------------------------------------------


def code_stamp() -> dict[str, tuple[int, int]]:
    """What identifies the code this process imported: the file (mtime, size) of every loaded
    module outside the standard library, roost's own and its dependencies'. Code that changes
    on disk changes one of them (an upgrade replaces files; a module newly imported is imported
    by one that changed); a directory's mtime would also change with a ``__pycache__`` made."""
    stdlib = os.path.realpath(sysconfig.get_path("stdlib")) + os.sep
    stamp: dict[str, tuple[int, int]] = {}
    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None)
        if not where or (os.path.realpath(where).startswith(stdlib) and "-packages" not in where):
            continue
        try:
            st = os.stat(where)
        except OSError:
            continue
        stamp[where] = (st.st_mtime_ns, st.st_size)
    return stamp


def changed(stamp: dict[str, tuple[int, int]]) -> str | None:
    """The first path whose stamp differs from ``stamp`` (or is gone), else None."""
    for path, (mtime, size) in stamp.items():
        try:
            st = os.stat(path)
        except OSError:
            return path
        if st.st_mtime_ns != mtime or st.st_size != size:
            return path
    return None


# -- the child ------------------------------------------------------------------------------------


def become_supervisor() -> None:
    """Right after the fork: nothing of the zygote's session, descriptors or signals is kept."""
    for sig in signal.valid_signals():  # a handler of the zygote's (SIGCHLD: ``reap``) goes
        handler = signal.getsignal(sig)
        if callable(handler) and handler is not signal.default_int_handler:
            signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
    gc.enable()


def start_supervisor(spec_path: str) -> None:
    from roost.actors.supervisor.actor import run

    run(Path(spec_path))


def run_child(spec_path: str, target: Callable[[str], None]) -> NoReturn:
    """The child's whole life: it never returns into the zygote's loop."""
    code = 1
    try:
        become_supervisor()
        target(spec_path)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # the process boundary: stderr is /dev/null, the log may not exist yet
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # what an interpreter's own exit would run (logging's flush)
        finally:
            os._exit(code)


# -- the server -----------------------------------------------------------------------------------


def reap(signum: int = 0, frame: Any = None) -> None:
    """Collect every child that has exited (the zygote's only children are supervisors)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def fork_supervisor(spec_path: str, target: Callable[[str], None] = start_supervisor) -> int:
    """Fork a child that runs ``target(spec_path)`` as a supervisor; its pid."""
    if threading.active_count() != 1:  # a fork copies one thread: a lock another held stays held
        raise RuntimeError("the zygote has started a thread")
    pid = os.fork()
    if pid == 0:
        run_child(spec_path, target)
    return pid


def answer(request: dict[str, Any], stamp: dict[str, tuple[int, int]]) -> dict[str, Any]:
    spec = request.get("spec")
    if not isinstance(spec, str):
        return {"error": "a request names a spec path"}
    stale = changed(stamp)
    if stale is not None:
        return {"stale": f"changed on disk: {stale}"}
    try:
        return {"pid": fork_supervisor(spec)}
    except OSError as exc:
        return {"error": f"fork: {exc.strerror or exc}"}
    except RuntimeError as exc:
        return {"error": str(exc)}


class Lines:
    """JSON lines on a pipe, read and written with the OS's calls (no buffered file objects a
    child could flush into the node's pipe)."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd, self._buf = rfd, wfd, b""

    def read(self) -> dict[str, Any] | None:
        while b"\n" not in self._buf:
            chunk = os.read(self.rfd, 65536)  # a SIGCHLD runs ``reap``, then the read resumes
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            got = json.loads(line)
        except ValueError:
            return {}
        return got if isinstance(got, dict) else {}

    def write(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.wfd, data) :]


def serve(lines: Lines) -> None:
    preload()
    stamp = code_stamp()
    gc.freeze()  # what is imported now stays shared: no collection writes to it again
    signal.signal(signal.SIGCHLD, reap)
    lines.write({"ready": {"pid": os.getpid(), "roost": __version__}})
    while (request := lines.read()) is not None:
        reply = answer(request, stamp)
        lines.write(reply)
        if "stale" in reply:
            return


def main() -> None:
    gc.disable()  # no collection while importing: fewer half-empty pages to share
    lines = Lines(0, 1)
    # stdout is the node's reply pipe: a stray print must not land in it
    sys.stdout = sys.stderr
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):  # the node has gone; a Ctrl-C
        serve(lines)
