"""``autopar solve/place --searcher NAME``: run a learned or heuristic searcher beside the
exact search and print its one-line summary (the command-line side of
:mod:`autopar_opt.learn.harness`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autopar_opt.cli.rich_console import Console

from autopar_opt.learn.base import SearcherResult, SearcherUnavailable, SearcherUnknown, run_searcher
from autopar_opt.learn.harness import search_spec, searcher_block


def _fmt(x: Any) -> str:
    return "-" if x is None else (x if isinstance(x, str) else f"{x:.6g}")


@dataclass
class SearcherHook:
    """What ``autopar solve --searcher`` hands to the search command.

    ``policy`` (a policy file) and ``decoder`` (``node`` | ``block``) are GDP's options on
    a placement; :meth:`problems` checks them (and reads the policy) before any work."""

    name: str
    budget_s: float
    seed: int = 0
    policy: str | None = None
    decoder: str | None = None
    loaded_policy: Any = None

    def problems(self) -> list:
        """Option problems of ``--policy``/``--decoder`` (empty when fine); reads the policy."""
        from autopar_opt.core.errors import SpecProblem
        from autopar_opt.core.files import COMMAND_LINE

        out = []
        if (self.policy is not None or self.decoder is not None) and self.name != "gdp":
            out.append(SpecProblem(COMMAND_LINE, "--policy" if self.policy else "--decoder",
                                   self.policy or self.decoder, "is an option of the gdp searcher",
                                   "add --searcher gdp, or drop it"))
        if self.decoder not in (None, "node", "block"):
            out.append(SpecProblem(COMMAND_LINE, "--decoder", self.decoder, "must be node or block",
                                   "use --decoder node (every feasible placement) or block"))
        if self.policy is not None and self.decoder == "block":
            out.append(SpecProblem(COMMAND_LINE, "--policy", self.policy, "drives the per-node "
                                   "decoder, not the block decoder", "drop --decoder block"))
        if out or self.policy is None:
            return out
        from autopar_opt.learn.base import INSTALL_HINT, torch_available

        if not torch_available():
            return [SpecProblem(COMMAND_LINE, "--policy", self.policy, "needs PyTorch",
                                INSTALL_HINT)]
        from autopar_opt.learn.policy_file import FIX, PolicyFileError, load_policy

        try:
            self.loaded_policy = load_policy(self.policy)[0]
        except PolicyFileError as exc:
            return [SpecProblem(str(exc.path), exc.key, exc.value, exc.rule, FIX)]
        return []

    def options(self) -> dict:
        """Keyword options for the searcher (GDP's decoder and pre-trained policy)."""
        opts: dict = {}
        if self.decoder is not None:
            opts["decoder"] = self.decoder
        if self.loaded_policy is not None:
            opts["policy"] = self.loaded_policy
        return opts

    def run(self, spec: Any, err: Console) -> SearcherResult | None:
        """Run the searcher; None (and the reason on stderr) when it cannot run."""
        if not self._on_this_space(err):
            return None
        try:
            return search_spec(spec, self.name, self.budget_s, self.seed)
        except (SearcherUnavailable, SearcherUnknown) as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            return None

    def _on_this_space(self, err: Console) -> bool:
        """False (and the reason on stderr) for a placement-only searcher off placement."""
        from autopar_opt.learn.base import PLACEMENT_ONLY

        if self.name in PLACEMENT_ONLY:
            err.print(f"error: --searcher = {self.name!r}: places operator graphs only; use it "
                      f"with `autopar place`, or choose random, anneal, dqn or gdp here",
                      markup=False, highlight=False, soft_wrap=True)
            return False
        return True

    def run_placement(self, problem: Any, contiguous: bool, err: Console) -> SearcherResult | None:
        """Run the searcher on a placement problem (max-load); None when it cannot run."""
        from autopar_opt.learn.placement_space import PlacementSpace

        try:
            return run_searcher(self.name, PlacementSpace(problem, contiguous), self.budget_s,
                                seed=self.seed, **self.options())
        except (SearcherUnavailable, SearcherUnknown) as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            return None
        except ValueError as exc:
            # an instance this searcher cannot take (GDP's decoder: at most 63 devices): a
            # refused option, named and JSON under --json, not a bare line on stderr (QA round 12)
            from autopar_opt.cli import options as opt
            from autopar_opt.core.errors import SpecProblem
            from autopar_opt.core.files import COMMAND_LINE

            rule, _, fix = str(exc).partition(": use ")
            raise opt.OptionError([SpecProblem(COMMAND_LINE, "--searcher", self.name, rule,
                                               f"use {fix}" if fix else "choose another searcher")])

    def run_operator(self, spec: Any, err: Console) -> SearcherResult | None:
        """Run the searcher on an operator-sharding spec's space; None when it cannot run.
        A searcher without an operator task (``gdp``) is a refused option (exit 2), before any
        work (QA round 35: an internal error, exit 70, from inside GDP)."""
        from autopar_opt.learn.base import OPERATOR_SEARCHERS

        if self.name not in OPERATOR_SEARCHERS:
            from autopar_opt.cli import options as opt
            from autopar_opt.core.errors import SpecProblem
            from autopar_opt.core.files import COMMAND_LINE

            raise opt.OptionError([SpecProblem(
                COMMAND_LINE, "--searcher", self.name, "does not search the operator-sharding space "
                "(its policy places layer strategies and graph nodes)",
                f"use {', '.join(OPERATOR_SEARCHERS[:-1])} or {OPERATOR_SEARCHERS[-1]}")])
        from autopar_opt.learn.op_space import OpSearchSpace
        from autopar_opt.opspace.spec import schedule_of

        from autopar_opt.ir.training import Schedule

        pipe = spec.pipeline
        space = OpSearchSpace(spec.graph_for, spec.context, spec.rule, spec.reduce_scatter,
                              tuple(pipe.pp) if pipe else (1,), tuple(pipe.microbatches) if pipe else (1,),
                              schedule_of(pipe) if pipe else Schedule.one_f_one_b)
        try:
            return run_searcher(self.name, space, self.budget_s, seed=self.seed)
        except (SearcherUnavailable, SearcherUnknown, ValueError) as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            return None

    def block(self, result: SearcherResult, lower_bound: float | None,
              optimum: float | None) -> dict:
        return searcher_block(result, lower_bound, optimum)

    def summary(self, block: dict, console: Console) -> None:
        """One line: the searcher's plan and value against the bound and the optimum."""
        text = (f"  searcher {block['name']} (seed {block['seed']}, {block['wall_time_s']:.1f} s, "
                f"{block['samples']} samples): ")
        if block["value"] is None:
            console.print(text + "no feasible plan found")
            return
        gap, plan = block["gap"], block["plan"]
        where = (plan["outer"] if "outer" in plan else f"pp={plan['pp']} c={plan['microbatches']}"
                 if "pp" in plan else f"{len(set(plan['assignment']))} devices used")
        # under a framework target the searchers search the free per-layer space, and are
        # measured against its certificate, not the runnable one printed above
        free = " of the free per-layer space" if block.get("measured_against") else ""
        text += (f"{block['value']:.6g} (evaluator), {where}; "
                 f"proven lower bound{free} {_fmt(block['lower_bound'])}, gap "
                 + (f"{100 * gap:.3f}%" if isinstance(gap, float) else str(gap)))
        if block["ratio_to_optimum"] is not None:
            text += (f"; {block['ratio_to_optimum']:.4f} x the proven optimum{free} "
                     f"{_fmt(block['optimum'])}")
        if block.get("ratio_to_ceiling") is not None and block.get("ceiling") != block["optimum"]:
            text += (f"; {block['ratio_to_ceiling']:.4f} x its decoder's ceiling "
                     f"{_fmt(block['ceiling'])} (the best plan its space holds)")
        console.print(text)
