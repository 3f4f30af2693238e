"""The sub-commands beside the core ones of :mod:`fleetplan.cli.app`, one module each, wired in
by their ``add_arguments``: ``bench``, ``demo``, ``serve``, ``simulate``, and ``import`` /
``export`` / ``plot`` (:mod:`~fleetplan.cli.commands.tables`)."""
