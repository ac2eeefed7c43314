"""Capacity planning: sweeps of scenarios, each with a certified plan, priced as intervals.

>>> from autopar_opt.capacity import load_sweep       # doctest: +SKIP
>>> sweep = load_sweep("examples/capacity_llama3_70b.yaml")   # doctest: +SKIP
"""

from autopar_opt.capacity.answers import answers, compare, price_scenario
from autopar_opt.capacity.run import SweepRun, build_capacity_document, run_sweep
from autopar_opt.capacity.store import ResultStore
from autopar_opt.capacity.sweep import Scenario, Sweep, load_sweep

__all__ = ["ResultStore", "Scenario", "Sweep", "SweepRun", "answers", "build_capacity_document",
           "compare", "load_sweep", "price_scenario", "run_sweep"]
