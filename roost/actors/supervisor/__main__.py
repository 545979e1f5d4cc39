"""``python -m roost.actors.supervisor --spec F`` (one supervisor), or ``--zygote`` (the fork
server that forks them, POSIX only)."""

from roost.actors.runtime import lean

lean.keep_out()  # before anything imports structlog or asyncio

import sys  # noqa: E402

if sys.argv[1:] == ["--zygote"]:
    from roost.actors.supervisor.zygote import main
else:
    from roost.actors.supervisor.actor import main

main()
