"""``python -m roost.actors.node``."""

from roost.actors.runtime import lean

lean.keep_out()  # before anything imports structlog or asyncio

from roost.actors.node.daemon import main  # noqa: E402

main()
