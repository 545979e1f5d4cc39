"""``python -m roost.actors.state``."""

from roost.actors.state.store import main

main()
