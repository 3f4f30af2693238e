"""The planner's commands tried from outside: bad input is one line naming the flag (exit 2),
no plan is exit 1, and what the terminal prints agrees with the JSON and the report."""


import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.cli.app import main
from fleetplan.errors import InstanceError
from fleetplan.planning import size

INVENTORY = str(EXAMPLES / "inventory-30-jobs.json")


def test_size_without_a_target_is_refused_not_sized_to_nothing(tmp_path, capsys):
    # A forgotten --target used to print "optimal ... nothing to buy" and exit 0.
    sized = tmp_path / "sized.json"
    assert main(["size", INVENTORY, "--buy", "v100", "-o", str(sized)]) == 2
    err = capsys.readouterr().err
    assert "--target" in err and len(err.strip().splitlines()) == 1 and not sized.exists()
    with pytest.raises(InstanceError, match="at least one target"):
        size(fleetplan.load_instance(INVENTORY), [], ["v100"])


def test_size_unknown_policy_names_the_flag(capsys):
    assert main(["size", INVENTORY, "--target", "min_time_share>=0.5", "--buy", "k80", "--policy", "nosuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --policy:") and "nosuch" in err and len(err.splitlines()) == 1

