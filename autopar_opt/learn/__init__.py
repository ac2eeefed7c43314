"""Searchers beside the exact solvers: random, annealing, Auto-MAP's DQN, GDP's graph policy.

They search the exact method's space or a stated part of it (which, for each
searcher: :mod:`autopar_opt.learn.base`), report plans priced by the independent
evaluator (:func:`autopar_opt.cost.evaluate.evaluate`,
:func:`autopar_opt.placement.evaluate.evaluate_placement`), and are measured against
the proven optimum and their own ceiling (benchmarks/learned/). ``dqn`` and ``gdp`` need
PyTorch (``pip install 'autopar-opt[learn]'``); importing this package does not.
"""

from autopar_opt.learn.base import (SEARCHERS, SearcherResult, SearcherUnavailable, get_searcher,
                                    run_searcher)
from autopar_opt.learn.space import LayerSpace

__all__ = ["SEARCHERS", "LayerSpace", "SearcherResult", "SearcherUnavailable", "get_searcher",
           "run_searcher"]
