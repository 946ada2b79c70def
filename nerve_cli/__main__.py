from nerve_cli.cli.app import main

main()
