from surfer.apps.cli import main

main()
