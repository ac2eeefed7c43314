"""Operator-level sharding (issue 31): every operator's split over a device mesh, solved
exactly (DP and MILP, every logical mesh, a certificate), Megatron's templates inside the
space, pipeline stages with the same intra-stage space, and the ``problem:
operator_sharding`` spec of ``autopar solve``."""
