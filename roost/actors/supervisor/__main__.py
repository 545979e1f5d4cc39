"""``python -m roost.actors.supervisor``."""

from roost.actors.supervisor.actor import main

main()
