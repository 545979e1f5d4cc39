"""``python -m roost.actors.node``."""

from roost.actors.node.daemon import main

main()
