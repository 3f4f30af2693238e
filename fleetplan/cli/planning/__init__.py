"""The planner's commands: ``size``, ``whatif`` and ``compare``
(:mod:`~fleetplan.cli.planning.commands`), ``horizon`` (:mod:`~fleetplan.cli.planning.horizon`),
what they print and write (:mod:`~fleetplan.cli.planning.output`) and their HTML reports
(:mod:`~fleetplan.cli.planning.report`)."""
