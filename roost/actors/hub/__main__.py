"""``python -m roost.actors.hub``."""

from roost.actors.hub.actor import main

main()
