"""``python -m roost.actors.state``."""

from roost.actors.runtime import lean

lean.keep_out()  # before anything imports structlog or asyncio

from roost.actors.state.store import main  # noqa: E402

main()
