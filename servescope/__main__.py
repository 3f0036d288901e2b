"""`python -m servescope`: the same CLI as the `servescope` command."""

from servescope.cli import main

main()
