"""``thinkloop ui``: a terminal UI (Textual) to chat with an agent and to watch and steer runs,
in this process or on a ``thinkloop serve`` gateway. Needs the ``tui`` extra."""
