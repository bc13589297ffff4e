"""Subcommands of the ``facesegment`` CLI: one module per subcommand.

Each module defines ``HELP`` (one line), ``DESCRIPTION`` (longer text),
``add_arguments(parser)`` and ``run(args) -> int`` (the exit status).
"""

#: Subcommands in the order ``facesegment --help`` lists them.
COMMANDS = ("data", "label", "extract", "train", "evaluate", "segment", "figures",
            "warmup", "models", "classes")
