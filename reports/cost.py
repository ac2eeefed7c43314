"""What writing the report costs, priced before the search (issue 15).

``autopar solve --time-limit T --out DIR`` promises its outputs within the
limit, so the search stops early enough to leave time for them. That time
grows with the plan: the report's timeline draws about four bars per (stage,
micro-batch) pair, the memory chart and the tables have a row per stage, the
plan table a line per layer, the certificate a row per configuration. The
final plan is not known before the search, so the reserve is priced for the
largest plan the search space allows (:func:`largest_report`).

Costs are counted in units of a probe: one small chart (:func:`probe_s`,
a one-stage memory chart, figure to SVG text), rendered and timed in the same
process just before the search. Measured in probe units, the costs are
properties of the renderer, not of the machine or its load, which the probe
measures; rendering it also loads the fonts and caches the first chart would
otherwise load inside the reserve. The coefficients of :func:`report_units`
are upper envelopes of the ratios measured by
``benchmarks/robustness/output_cost.py`` (a table of sizes from 1 × 1 to
64 × 64 and 5,000 layers), which checks that no measured output exceeds them.
"""

from __future__ import annotations

import time

#: Cost of everything but the timeline, in probe units: a fixed part (the
#: context, the memory chart, the template, plan.json's text, leaving the
#: interpreter), per stage (table rows; tick labels are capped), per layer (the
#: plan table) and per configuration (the certificate table).
FIXED_UNITS, STAGE_UNITS, LAYER_UNITS, CONFIG_UNITS = 4.0, 0.02, 0.0008, 0.004
#: Cost of the timeline, in probe units: a fixed part (one figure), per bar
#: drawn as a vector (up to :data:`autopar_opt.reports.charts.RASTER_OPS`), and
#: per (stage, micro-batch) pair (simulated, converted, rasterised: four bars).
TIMELINE_UNITS, VECTOR_BAR_UNITS, CELL_UNITS = 1.5, 0.0015, 0.0025
#: The probe's wall time on an idle reference machine (the 2-core development
#: machine), used when no probe was run (no report to write).
REFERENCE_PROBE_S = 0.05

_PROBE = {"stages": [{"index": 0, "weight_gib": 1.0, "activation_gib": 1.0}],
          "capacity_gib": 2.5, "hbm_gib": 3.0}


def probe_s() -> float:
    """Wall seconds to render one small chart (the unit of :func:`report_units`)."""
    from autopar_opt.reports.charts import memory_svg

    began = time.perf_counter()
    memory_svg(_PROBE)
    return time.perf_counter() - began


def timeline_units(stages: int, cells: int) -> float:
    """The timeline's cost in probe units for ``stages`` stages and ``cells``
    (stage, micro-batch) pairs; 0 above the timeline's limit, where it is left
    out (:data:`autopar_opt.reports.sections.MAX_TIMELINE_CELLS`)."""
    from autopar_opt.reports.charts import RASTER_OPS
    from autopar_opt.reports.sections import MAX_TIMELINE_CELLS

    if cells <= 0 or cells > MAX_TIMELINE_CELLS:
        return 0.0
    # a forward and a backward per pair, two sends when the stages exchange data, a sync per
    # stage: 2·cells + stages to 4·cells + stages bars, drawn as vectors up to RASTER_OPS
    vector = min(4 * cells + stages, RASTER_OPS) if 2 * cells + stages <= RASTER_OPS else 0
    return TIMELINE_UNITS + VECTOR_BAR_UNITS * vector + CELL_UNITS * cells


def report_units(stages: int, cells: int, layers: int, configurations: int) -> float:
    """The outputs' cost in probe units (:data:`FIXED_UNITS` ... and
    :func:`timeline_units`) for a plan of ``stages`` stages and ``cells``
    (stage, micro-batch) pairs, a model of ``layers`` layers and a search of
    ``configurations`` configurations."""
    return (FIXED_UNITS + STAGE_UNITS * stages + LAYER_UNITS * layers
            + CONFIG_UNITS * configurations + timeline_units(stages, cells))


def largest_report(configs, layers: int) -> float:
    """:func:`report_units` of the most expensive plan among the outer
    configurations ``configs`` (objects with ``pp`` and ``microbatches``)."""
    if not configs:
        return report_units(1, 0, layers, 0)
    return max(report_units(c.pp, c.pp * c.microbatches, layers, len(configs)) for c in configs)


def seconds(units: float, unit_s: float) -> float:
    """``units`` probe units in seconds, ``unit_s`` the measured probe."""
    return units * unit_s
