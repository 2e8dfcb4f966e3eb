"""`python -m kfk` runs the same CLI as the `kfk` console script."""

from kfk.cli import main

main()
