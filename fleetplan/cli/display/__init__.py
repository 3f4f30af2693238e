"""What the command line shows: the shared tables of results, verdicts and options
(:mod:`~fleetplan.cli.display.render`), each kind's own view (:mod:`~fleetplan.cli.display.views`)
and numbers in their printed form (:mod:`~fleetplan.cli.display.numbers`)."""
