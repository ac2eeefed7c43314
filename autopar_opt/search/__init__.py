"""Outer search over (pp, micro-batches, schedule) and the optimality certificate."""

from autopar_opt.search.certificate import Certificate, ConfigRecord
from autopar_opt.search.configs import OuterConfig, outer_configs
from autopar_opt.search.engine import SearchOptions, SearchResult, run_search

__all__ = ["Certificate", "ConfigRecord", "OuterConfig", "SearchOptions", "SearchResult",
           "outer_configs", "run_search"]
