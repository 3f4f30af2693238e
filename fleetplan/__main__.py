"""``python -m fleetplan``: the same as the ``fleetplan`` command."""

from fleetplan.cli.entry import run

run()
