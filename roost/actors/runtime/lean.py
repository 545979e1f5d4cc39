"""Keep libraries a roost process never uses out of it (one supervisor runs per session).

structlog imports rich (and with it pygments) for pretty tracebacks whenever they are installed,
which they are, for the CLI; asyncio imports ssl (OpenSSL's tables), which no roost process needs
(CURVE is libzmq's). Marking them absent before anything imports them saves a supervisor about a
fifth of its private memory and a third of its start-up imports. Only a process's entry point
(``__main__``) calls ``keep_out``: in a process that also runs the CLI (a test run) nothing changes.
"""

from __future__ import annotations

import sys

UNUSED = ("rich", "pygments", "better_exceptions", "ssl", "_ssl")


def keep_out() -> None:
    for name in UNUSED:
        if name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]  # import of it now fails fast
