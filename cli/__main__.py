"""``python -m cli``: the same as the ``swtune`` script."""

from cli.app import main

main()
