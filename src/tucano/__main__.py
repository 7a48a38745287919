from tucano.cli import main

main()
