"""The horizon file: periods, demand (with scenarios), what may be bought when, budgets and
targets — read from YAML or JSON, with a CSV table for the purchase options, and validated with
the file, line and column in every error.

A minimal file (docs/planning.md, "Planning over time", documents every field)::

    periods: 8                  # quarters by default
    targets: ["min_time_share>=0.3"]
    demand: {growth: 0.15}      # jobs grow 15% a period
    buy:
      h100: {price: 30000, lead_time: 2, lifetime: 16, salvage: 0.1, opex_per_hour: 0.7}
    budget: 500000              # per period

>>> spec = parse_horizon({"periods": 3, "targets": ["min_time_share>=1"], "buy": {"v100": {"price": 1}}})
>>> spec.periods, spec.buy["v100"].lead_time, spec.scenario_list()[0].name
(3, 0, 'base')
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from fleetplan.errors import InstanceError
from fleetplan.instances.base import StrictModel

MAX_PERIODS = 64
MAX_SCENARIOS = 32
PositiveFloat = float


class PurchaseOption(StrictModel):
    """One thing that may be bought: a GPU type (allocation) or ``REGION/GPU_TYPE`` /
    ``REGION/storage`` (placement)."""

    price: float | list[float] = Field(description="price of one unit bought in each period: one number (then "
                                                   "falling by price_decline a period) or one per period")
    price_decline: float = Field(default=0.0, ge=0, lt=1, description="fraction the price falls each period")
    lead_time: int = Field(default=0, ge=0, description="periods from order to use: bought in t, usable from t+L")
    min_order: float = Field(default=0.0, ge=0, description="an order is 0 or at least this many units")
    max_order: float | None = Field(default=None, ge=0, description="most units one period's order may hold")
    lifetime: int | None = Field(default=None, ge=1, description="periods a unit is usable (None: beyond the "
                                                                  "horizon)")
    salvage: float = Field(default=0.0, ge=0, le=1, description="fraction of the price a unit is worth at the "
                                                                 "end of its life (straight-line in between)")
    opex_per_hour: float = Field(default=0.0, ge=0, description="operating cost of one installed unit per hour")

    @field_validator("price")
    @classmethod
    def _positive_prices(cls, value: float | list[float]) -> float | list[float]:
        prices = value if isinstance(value, list) else [value]
        if not prices or any(not math.isfinite(p) or p < 0 or p > 1e30 for p in prices):
            raise ValueError("prices must be non-negative finite numbers (at most 1e30)")
        return value


class Retirement(StrictModel):
    """Units of the existing fleet that retire: usable through period ``after``."""

    count: float = Field(gt=0)
    after: int = Field(ge=0, description="the last period they are usable (0: retired before period 1)")


class Existing(StrictModel):
    """The fleet the instance holds today, per type: its operating cost and retirements."""

    opex_per_hour: float = Field(default=0.0, ge=0)
    retire: list[Retirement] = Field(default_factory=list)


class NewJobs(StrictModel):
    """Jobs that appear from a period on (then grow as the others do)."""

    from_period: int = Field(ge=1)
    jobs: list[dict[str, Any]] = Field(min_length=1)


class Demand(StrictModel):
    """How the base instance's demand moves over the periods (all optional: constant demand)."""

    growth: float = Field(default=0.0, gt=-1, le=100, description="compound growth a period: period t's demand "
                                                                  "is (1 + growth)^(t-1) times the base")
    multipliers: list[float] | None = Field(default=None, description="demand per period as a multiple of the "
                                                                       "base (instead of growth)")
    classes: dict[str, float | list[float]] = Field(default_factory=dict, description="per job class "
                                                    "(allocation: job_type; placement: region) a growth rate "
                                                    "or a list of multipliers, overriding the above")
    new_jobs: list[NewJobs] = Field(default_factory=list)
    jobs_by_period: list[list[dict[str, Any]]] | None = Field(
        default=None, description="allocation: each period's jobs stated outright (in a file: `instances`, a "
        "list of instance files, one per period, whose jobs are read), instead of the base instance's grown")

    @field_validator("multipliers")
    @classmethod
    def _multipliers(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and any(not math.isfinite(m) or m < 0 or m > 1e6 for m in value):
            raise ValueError("multipliers must be finite numbers from 0 to 1e6")
        return value

    @field_validator("classes")
    @classmethod
    def _classes(cls, value: dict[str, float | list[float]]) -> dict[str, float | list[float]]:
        for name, entry in value.items():
            numbers = entry if isinstance(entry, list) else [entry]
            if any(not math.isfinite(m) or m > 1e6 for m in numbers) or (
                    isinstance(entry, list) and any(m < 0 for m in numbers)) or (
                    not isinstance(entry, list) and entry <= -1):
                raise ValueError(f"class '{name}': a growth rate above -1 or multipliers from 0 to 1e6")
        return value

    def multiplier(self, period: int, job_class: str | None) -> float:
        """Period ``period``'s (1-based) demand as a multiple of the base, for ``job_class``."""
        entry: float | list[float] | None = self.classes.get(job_class) if job_class is not None else None
        if isinstance(entry, list):
            return float(entry[period - 1])
        if entry is not None:
            return float((1.0 + entry) ** (period - 1))
        if self.multipliers is not None:
            return float(self.multipliers[period - 1])
        return float((1.0 + self.growth) ** (period - 1))


class Scenario(StrictModel):
    name: str = Field(min_length=1, max_length=60)
    probability: float = Field(gt=0, le=1)
    demand: Demand = Field(default_factory=Demand)


class Scenarios(StrictModel):
    """Demand as scenarios. ``two-stage``: orders of periods up to ``decision_period`` are placed
    before the scenario is known (one order for all), later ones adapt per scenario, and the
    expected cost is minimised; ``robust``: one schedule meets every scenario."""

    mode: Literal["two-stage", "robust"] = "two-stage"
    decision_period: int = Field(default=1, ge=1)
    cases: list[Scenario] = Field(min_length=1, max_length=MAX_SCENARIOS)

    @model_validator(mode="after")
    def _probabilities(self) -> Scenarios:
        total = sum(case.probability for case in self.cases)
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"the scenarios' probabilities sum to {total:g}, not 1")
        names = [case.name for case in self.cases]
        if len(set(names)) != len(names):
            raise ValueError(f"scenario '{next(n for n in names if names.count(n) > 1)}' is named twice")
        return self


class HorizonSpec(StrictModel):
    """The whole horizon file."""

    periods: int = Field(ge=1, le=MAX_PERIODS, description="number of periods")
    period_name: str = Field(default="quarter", min_length=1, max_length=30)
    hours_per_period: float = Field(default=2190.0, gt=0, le=1e6, description="hours in one period (opex)")
    discount_rate: float = Field(default=0.0, ge=0, lt=1, description="discount rate per period")
    currency: str = Field(default="", max_length=10)
    targets: list[str] = Field(min_length=1, description="service targets every period must meet")
    targets_by_period: dict[int, list[str]] = Field(default_factory=dict, description="targets of one period "
                                                                                       "(instead of targets)")
    buy: dict[str, PurchaseOption] = Field(min_length=1)
    existing: dict[str, Existing] = Field(default_factory=dict)
    budget: float | list[float | None] | None = Field(default=None, description="capital budget per period")
    budget_covers: Literal["capex", "capex+opex"] = "capex"
    demand: Demand = Field(default_factory=Demand)
    scenarios: Scenarios | None = None

    @model_validator(mode="after")
    def _against_periods(self) -> HorizonSpec:
        T = self.periods
        problems: list[tuple[str, str]] = []
        for name, option in self.buy.items():
            if option.lead_time >= T:
                problems.append((f"buy.{name}.lead_time", f"{option.lead_time} periods: an order arrives after the "
                                 f"horizon's {T} periods end (at most {T - 1})"))
            if isinstance(option.price, list) and len(option.price) != T:
                problems.append((f"buy.{name}.price", f"{len(option.price)} prices for {T} periods"))
            if option.max_order is not None and option.max_order < option.min_order:
                problems.append((f"buy.{name}.max_order", f"{option.max_order:g} is below min_order "
                                                          f"{option.min_order:g}"))
        if isinstance(self.budget, list):
            if len(self.budget) != T:
                problems.append(("budget", f"{len(self.budget)} budgets for {T} periods"))
            for t, value in enumerate(self.budget):
                if value is not None and (not math.isfinite(value) or value < 0 or value > 1e30):
                    problems.append((f"budget[{t}]", "must be a non-negative finite number"))
        elif self.budget is not None and (not math.isfinite(self.budget) or self.budget < 0 or self.budget > 1e30):
            problems.append(("budget", "must be a non-negative finite number"))
        for period in self.targets_by_period:
            if not 1 <= period <= T:
                problems.append((f"targets_by_period.{period}", f"no period {period} (periods are 1 to {T})"))
        for name, existing in self.existing.items():
            for i, retirement in enumerate(existing.retire):
                if retirement.after > T:
                    problems.append((f"existing.{name}.retire[{i}].after", f"period {retirement.after} is past the "
                                     f"horizon's {T} periods"))
        demands = [("demand", self.demand)]
        if self.scenarios is not None:
            demands += [(f"scenarios.cases[{i}].demand", case.demand) for i, case in enumerate(self.scenarios.cases)]
            if self.scenarios.decision_period > T:
                problems.append(("scenarios.decision_period", f"period {self.scenarios.decision_period} is past the "
                                                              f"horizon's {T} periods"))
        for where, demand in demands:
            if demand.multipliers is not None and len(demand.multipliers) != T:
                problems.append((f"{where}.multipliers", f"{len(demand.multipliers)} multipliers for {T} periods"))
            for name, entry in demand.classes.items():
                if isinstance(entry, list) and len(entry) != T:
                    problems.append((f"{where}.classes.{name}", f"{len(entry)} multipliers for {T} periods"))
            if demand.jobs_by_period is not None:
                if len(demand.jobs_by_period) != T:
                    problems.append((f"{where}.jobs_by_period", f"{len(demand.jobs_by_period)} periods of jobs for "
                                                                f"{T} periods"))
                stated = [name for name, value in (("growth", demand.growth), ("multipliers", demand.multipliers),
                                                   ("classes", demand.classes), ("new_jobs", demand.new_jobs))
                          if value]
                if stated:
                    problems.append((f"{where}.{stated[0]}", "demand is stated per period (jobs_by_period or "
                                                             "instances): it does not also grow"))
            for i, group in enumerate(demand.new_jobs):
                if group.from_period > T:
                    problems.append((f"{where}.new_jobs[{i}].from_period", f"period {group.from_period} is past the "
                                                                            f"horizon's {T} periods"))
        if problems:
            raise InstanceError(problems[0][0], problems[0][1], more=problems[1:])
        return self

    # --- derived facts -----------------------------------------------------------------------

    def price(self, name: str, period: int) -> float:
        """The unit price of ``name`` bought in ``period`` (1-based)."""
        option = self.buy[name]
        if isinstance(option.price, list):
            return float(option.price[period - 1])
        return float(option.price * (1.0 - option.price_decline) ** (period - 1))

    def discount(self, period: int) -> float:
        """The present value of one unit of money spent in ``period`` (1-based)."""
        return float((1.0 + self.discount_rate) ** -(period - 1))

    def budget_of(self, period: int) -> float | None:
        if isinstance(self.budget, list):
            return self.budget[period - 1]
        return self.budget

    def targets_of(self, period: int) -> list[str]:
        return self.targets_by_period.get(period, self.targets)

    def scenario_list(self) -> list[Scenario]:
        """The scenarios (one called ``base`` with probability 1 when the file names none)."""
        if self.scenarios is None:
            return [Scenario(name="base", probability=1.0, demand=self.demand)]
        return list(self.scenarios.cases)

    def shared_until(self) -> int:
        """The last period whose orders every scenario shares (the whole horizon when robust)."""
        if self.scenarios is None or len(self.scenarios.cases) == 1 or self.scenarios.mode == "robust":
            return self.periods
        return self.scenarios.decision_period


# --- reading -------------------------------------------------------------------------------

BUY_COLUMNS = ("name", "price", "price_decline", "lead_time", "min_order", "max_order", "lifetime", "salvage",
               "opex_per_hour")


def parse_horizon(data: Any, source: str | None = None, base_folder: str | os.PathLike[str] | None = None,
                  text: str | None = None) -> HorizonSpec:
    """Validate a horizon given as a dict (a parsed file). ``buy`` may name a CSV file (relative
    to ``base_folder``) with a row per option. ``text`` (the file's YAML/JSON) lets errors name
    their line and column."""
    if data is None:  # an empty file (or one of comments only) reads as None in YAML
        raise InstanceError("", "the file is empty: a horizon is a mapping of fields (periods, targets, buy, ...)",
                            source)
    if not isinstance(data, dict):
        raise InstanceError("$", f"a horizon is a mapping of fields (periods, targets, buy, ...), not "
                                 f"{type(data).__name__}", source)
    if "kind" in data and "periods" not in data:  # the arguments swapped: one line, not one per field
        raise InstanceError("$", f"this is an instance file (kind {str(data['kind'])[:40]!r}), not a horizon: give "
                                 "the instance first, then the horizon (fleetplan horizon INSTANCE HORIZON.yaml)",
                            source)
    data = dict(data)
    if isinstance(data.get("buy"), str):
        data["buy"] = read_buy_table(Path(base_folder or ".") / data["buy"])
    data = _read_instances(data, Path(base_folder or "."))
    try:
        return HorizonSpec.model_validate(data)
    except InstanceError as error:
        raise _located(error, source, text) from None
    except ValidationError as error:
        from fleetplan.instances.base import _from_validation_error

        raise _located(_from_validation_error(error, None), source, text) from None


def _read_instances(data: dict[str, Any], base_folder: Path) -> dict[str, Any]:
    """``demand.instances`` (and each scenario's): one instance file a period (relative to the
    horizon file), read into ``jobs_by_period``; an entry may also be an instance's dict."""
    from fleetplan.instances import read_json_file

    def read(demand: Any, where: str) -> Any:
        if not isinstance(demand, dict) or "instances" not in demand:
            return demand
        demand = dict(demand)
        entries = demand.pop("instances")
        if "jobs_by_period" in demand:
            raise InstanceError(f"{where}.instances", "give the jobs of each period once: instances or jobs_by_period")
        if not isinstance(entries, list) or not entries:
            raise InstanceError(f"{where}.instances", "a list of instance files, one per period")
        periods = []
        for index, entry in enumerate(entries):
            try:
                loaded = entry if isinstance(entry, dict) else read_json_file(base_folder / str(entry))
            except InstanceError as error:
                raise InstanceError(f"{where}.instances[{index}]", error.reason) from None
            if not isinstance(loaded, dict) or not isinstance(loaded.get("jobs"), list):
                raise InstanceError(f"{where}.instances[{index}]", "not an allocation instance (no list of jobs)")
            periods.append(loaded["jobs"])
        demand["jobs_by_period"] = periods
        return demand

    if "demand" in data:
        data["demand"] = read(data["demand"], "demand")
    scenarios = data.get("scenarios")
    if isinstance(scenarios, dict) and isinstance(scenarios.get("cases"), list):
        scenarios = dict(scenarios)
        scenarios["cases"] = [dict(case, demand=read(case["demand"], f"scenarios.cases[{i}].demand"))
                              if isinstance(case, dict) and "demand" in case else case
                              for i, case in enumerate(scenarios["cases"])]
        data["scenarios"] = scenarios
    return data


def load_horizon(path: str | os.PathLike[str]) -> HorizonSpec:
    """Read and validate a horizon file (YAML or JSON)."""
    import yaml

    from fleetplan import bounded_yaml

    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InstanceError("", "not a text file (YAML or JSON expected)", source) from None
    except OSError as error:
        raise InstanceError("", f"cannot read: {error.strerror or error}", source) from None
    try:
        data = bounded_yaml.load(text, source)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InstanceError("", f"malformed YAML: {problem}", where) from None
    return parse_horizon(data, source, Path(path).parent, text)


def read_buy_table(path: Path) -> dict[str, dict[str, Any]]:
    """The purchase options as a CSV table: a header naming :data:`BUY_COLUMNS` (``name`` and
    ``price`` required) and a row per option; an empty cell keeps the default."""
    source = str(path)
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as error:
        raise InstanceError("buy", f"cannot read the table: {error.strerror or error}", source) from None
    options: dict[str, dict[str, Any]] = {}
    with handle:
        reader = csv.reader(handle)
        header = [cell.strip() for cell in next(reader, [])]
        for column, name in enumerate(header, start=1):
            if name not in BUY_COLUMNS:
                raise InstanceError("buy", f"unknown column '{name}' (columns: {', '.join(BUY_COLUMNS)})",
                                    f"{source}:1:{column}")
        for required in ("name", "price"):
            if required not in header:
                raise InstanceError("buy", f"the table needs a '{required}' column", f"{source}:1")
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise InstanceError("buy", f"{len(row)} cells for {len(header)} columns", f"{source}:{line}")
            entry: dict[str, Any] = {}
            for column, (field, cell) in enumerate(zip(header, row, strict=True), start=1):
                cell = cell.strip()
                if field == "name" or not cell:
                    continue
                try:
                    number = float(cell)
                except ValueError:
                    raise InstanceError(f"buy.{row[header.index('name')].strip()}.{field}",
                                        f"'{cell[:30]}' is not a number", f"{source}:{line}:{column}") from None
                entry[field] = int(number) if field in ("lead_time", "lifetime") and number.is_integer() else number
            name = row[header.index("name")].strip()
            if not name or name in options:
                raise InstanceError("buy", f"{'a row without a name' if not name else f'{name!r} is named twice'}",
                                    f"{source}:{line}")
            options[name] = entry
    if not options:
        raise InstanceError("buy", "the table has no rows", source)
    return options


def _located(error: InstanceError, source: str | None, text: str | None) -> InstanceError:
    """``error`` with the file, line and column of its field (where the text shows it)."""
    where = source
    if text is not None and error.path:
        position = _position(text, error.path)
        if position is not None and source is not None:
            where = f"{source}:{position[0]}:{position[1]}"
    return InstanceError(error.path, error.reason, where, error.more)


def _position(text: str, path: str) -> tuple[int, int] | None:
    """(line, column), 1-based, of the YAML node at a JSON path like ``buy.h100.lead_time``."""
    import re

    import yaml

    try:
        node = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    parts = [int(p[1:-1]) if p.startswith("[") else p for p in re.findall(r"\[\d+\]|[^.\[\]]+", path)]
    found = node
    for part in parts:
        if isinstance(found, yaml.MappingNode):
            match = next((value for key, value in found.value if str(key.value) == str(part)), None)
        elif isinstance(found, yaml.SequenceNode) and isinstance(part, int) and part < len(found.value):
            match = found.value[part]
        else:
            match = None
        if match is None:
            break
        found = match
    if found is None:
        return None
    return found.start_mark.line + 1, found.start_mark.column + 1


def as_spec(horizon: Any) -> HorizonSpec:
    """A horizon given as a :class:`HorizonSpec`, a dict in the file's layout, or a file's path,
    validated."""

    if isinstance(horizon, HorizonSpec):
        return horizon
    if isinstance(horizon, dict):
        return parse_horizon(horizon, "horizon")
    if isinstance(horizon, (str, os.PathLike)):
        return load_horizon(horizon)
    raise InstanceError("horizon", f"expected a HorizonSpec, a dict or a horizon file's path, got "
                                   f"{type(horizon).__name__}")
