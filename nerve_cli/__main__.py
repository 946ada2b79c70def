from nerve_cli.cli.entry import main

main()
