"""Searchers beside the exact solvers: random, annealing, Auto-MAP's DQN, GDP's graph policy.

They search the same space as the exact method (:class:`LayerSpace`), report
plans priced by :func:`autopar_opt.cost.evaluate.evaluate`, and are measured
against the proven optimum (benchmarks/learned/). ``dqn`` and ``gdp`` need
PyTorch (``pip install 'autopar-opt[learn]'``); importing this package does not.
"""

from autopar_opt.learn.base import (SEARCHERS, SearcherResult, SearcherUnavailable, get_searcher,
                                    run_searcher)
from autopar_opt.learn.space import LayerSpace

__all__ = ["SEARCHERS", "LayerSpace", "SearcherResult", "SearcherUnavailable", "get_searcher",
           "run_searcher"]
