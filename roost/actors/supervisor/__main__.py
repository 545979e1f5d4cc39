"""``python -m roost.actors.supervisor``."""

from roost.actors.runtime import lean

lean.keep_out()  # before anything imports structlog or asyncio

from roost.actors.supervisor.actor import main  # noqa: E402

main()
