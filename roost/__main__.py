from roost.cli.main import main

main()
