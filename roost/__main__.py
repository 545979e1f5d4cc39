from roost.cli.quick import main

main()
