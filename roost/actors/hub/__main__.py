"""``python -m roost.actors.hub``."""

from roost.actors.runtime import lean

lean.keep_out()  # before anything imports structlog or asyncio

from roost.actors.hub.actor import main  # noqa: E402

main()
