"""Neutral core types shared by every layer: no import of any other autopar_opt package.

- :mod:`autopar_opt.core.result`: :class:`SolveResult`, :class:`Termination`,
  :class:`ProblemClass` and :func:`relative_gap` (the one gap function);
- :mod:`autopar_opt.core.matrix`: :class:`MatrixForm`, the solver-neutral
  matrix form of a linear (MI)LP.

Formulations build these, solver backends (the DP included) return them and
the search reads them, so none of those packages needs to import another
(docs/ARCHITECTURE.md).
"""
