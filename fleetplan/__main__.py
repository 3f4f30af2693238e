"""``python -m fleetplan``: the same as the ``fleetplan`` command."""

from fleetplan._entry import run

run()
