from fxctl.cli import main

main()
