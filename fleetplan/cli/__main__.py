"""``python -m fleetplan.cli``: the same as the ``fleetplan`` command."""

from fleetplan.cli.entry import run

run()
