"""``python -m thinkloop``: the same CLI as the ``thinkloop`` command."""

from thinkloop.cli.app import main

if __name__ == "__main__":
    main()
