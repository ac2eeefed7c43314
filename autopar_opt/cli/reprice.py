"""``autopar estimate SPEC --plan PLAN_JSON``: a plan autopar wrote, priced again.

The plan is read and checked by :func:`autopar_opt.spec.plan_json.load_spec_with_plan`;
this module says what the re-pricing assumed: that the plan is the file's, priced under
the spec's cluster, training and cost model, each setting that differs from the one the
file records, and the iteration time the file records beside the new one (equal when
nothing differs: the same :func:`~autopar_opt.cost.evaluate.evaluate` priced both).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Repriced:
    """What a re-pricing of ``file`` says beside the estimate."""

    file: str
    spec: str
    #: the iteration time the file records (None: it records none)
    recorded_s: float | None
    #: ``section.key old -> new`` for each recorded setting the spec changes
    differences: list[str] = field(default_factory=list)
    now_s: float | None = None

    def priced(self, seconds: float) -> None:
        """Record the iteration time the plan prices at now."""
        self.now_s = seconds

    @property
    def notes(self) -> list[str]:
        """The lines the text output ends with."""
        out = [f"the plan is {self.file}'s, priced under {self.spec} (its cluster, training "
               "and cost model)"]
        if self.differences:
            out.append(f"{self.file} was made for another case; re-priced with the spec's "
                       + ", ".join(self.differences))
        if self.recorded_s is not None and self.now_s is not None:
            change = self.now_s / self.recorded_s - 1 if self.recorded_s > 0 else 0.0
            same = abs(change) <= 1e-9
            out.append(f"{self.file} records {self.recorded_s:.6g} s per iteration; re-priced "
                       + (f"{self.now_s:.6g} s, the same" if same else
                          f"{self.now_s:.6g} s ({100 * change:+.2f}%"
                          + ("" if self.differences else ": the plan was edited, or the spec "
                             "or the cost model is not the one it was priced with") + ")"))
        return out

    def document(self) -> dict[str, Any]:
        """The keys ``estimate --json`` adds."""
        return {"plan_file": self.file,
                "repriced": {"recorded_iteration_time_s": self.recorded_s,
                             "differences": list(self.differences), "notes": self.notes}}


def load_repriced(spec_path: str, plan_file: str) -> tuple[Any, Repriced]:
    """The spec with ``plan_file``'s plan, and what the re-pricing says."""
    from autopar_opt.spec.plan_json import case_differences, load_spec_with_plan

    from autopar_opt.cli.errors import CommandError
    from autopar_opt.core.errors import SpecError

    try:
        spec, doc = load_spec_with_plan(spec_path, plan_file)
    except SpecError as exc:
        if any(p.file != str(plan_file) for p in exc.problems):
            raise                    # the spec's own problems: "invalid spec"
        raise CommandError(exc.problems, "invalid plan") from None
    return spec, Repriced(str(plan_file), str(spec_path), recorded_time(doc),
                          case_differences(doc, spec))


def recorded_time(doc: dict[str, Any]) -> float | None:
    """The iteration time a plan file records (``metrics.iteration_time_s``), or None where
    it records none usable: absent, not a number, not positive, or not finite (a hand-edited
    NaN was printed as 'records nan s ..., the same' and as NaN in --json, which no JSON
    reader takes)."""
    import math

    metrics = doc.get("metrics") if isinstance(doc.get("metrics"), dict) else {}
    recorded = metrics.get("iteration_time_s")
    if isinstance(recorded, bool) or not isinstance(recorded, (int, float)) \
            or not math.isfinite(recorded) or recorded <= 0:
        return None
    return recorded
