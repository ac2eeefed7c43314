"""The cost model of operator-level sharding (PaSE, Alpa): per-configuration costs
(:mod:`.pricing`), redistribution on edges (:mod:`.redistribution`), the tables the DP
and the MILP read (:mod:`.tables`) and the independent evaluator (:mod:`.evaluate`)."""
