"""The placement problem (GDP: operator graph → devices), as plain arrays.

:class:`PlacementProblem` is the public instance type (used by the exact
solvers, the bounds, the evaluator and the learned searchers): a DAG of
operator nodes with per-device-type run times, memory sizes, output transfer
costs and colocation classes, plus a list of devices. Units are whatever the
input uses, consistently (the public workloads use milliseconds and bytes).

Model (Tarnawski et al., "Efficient Algorithms for Device Placement of DNN
Graph Operators", NeurIPS 2020, §3 and the data README): a placement maps
every node to one device. A device's **load** is the sum of its nodes' times
on its device type plus, when the device type pays communication
(``pays_comm``, accelerators), ``comm[u]`` once for every node ``u`` on it
whose output is consumed on another device (sending) and ``comm[u]`` once
for every node ``u`` on another device whose output it consumes (receiving).
Equivalently each node ``u`` with consumers defines a hyperedge
``{u} ∪ consumers(u)`` of weight ``comm[u]`` and a device pays the weight of
every hyperedge it cuts (holds part of, not all of).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class DeviceType:
    """One kind of device and how many of it there are.

    Attributes
    ----------
    name : key into :attr:`PlacementProblem.time` (e.g. ``"accelerator"``, ``"cpu"``).
    count : number of devices of this type.
    memory_bytes : memory of one device (``inf``: unlimited).
    pays_comm : whether a device of this type pays transfer costs in its load
        (accelerators do; the host CPU does not, as in the paper).
    """

    name: str
    count: int
    memory_bytes: float = float("inf")
    pays_comm: bool = True


@dataclass
class PlacementProblem:
    """An operator-graph placement instance (see the module docstring).

    Attributes
    ----------
    name : instance name (reports).
    node_names : one per node; nodes are ``0..n-1``.
    node_ids : the ids the input used (the public format's ``id``), for output.
    edges : ``(E, 2)`` int array of data dependencies ``u -> v``.
    time : device-type name -> ``(n,)`` run time of each node on that type;
        ``inf`` means the node cannot run there (e.g. CPU-only nodes).
    size_bytes : ``(n,)`` memory a node needs on a device with finite memory.
    comm : ``(n,)`` time to move the node's output between devices.
    color : ``(n,)`` colocation class (nodes with equal class share a device).
    is_backward : ``(n,)`` training graphs: backward nodes follow their
        forward class and are not part of the contiguity order.
    device_types : the devices, by type.
    """

    name: str
    node_names: list[str]
    node_ids: list[int]
    edges: np.ndarray
    time: dict[str, np.ndarray]
    size_bytes: np.ndarray
    comm: np.ndarray
    color: np.ndarray
    is_backward: np.ndarray
    device_types: list[DeviceType]
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.node_names)
        self.edges = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
        self.size_bytes = np.asarray(self.size_bytes, dtype=float)
        self.comm = np.asarray(self.comm, dtype=float)
        self.color = np.asarray(self.color, dtype=np.int64)
        self.is_backward = np.asarray(self.is_backward, dtype=bool)
        self.time = {k: np.asarray(v, dtype=float) for k, v in self.time.items()}
        for arr, what in ((self.size_bytes, "size_bytes"), (self.comm, "comm"),
                          (self.color, "color"), (self.is_backward, "is_backward"),
                          *((v, f"time[{k}]") for k, v in self.time.items())):
            if arr.shape != (n,):
                raise ValueError(f"{what} has shape {arr.shape}, expected ({n},)")
        for dt in self.device_types:
            if dt.name not in self.time:
                raise ValueError(f"device type {dt.name!r} has no time array")

    @property
    def num_nodes(self) -> int:
        return len(self.node_names)

    @property
    def num_devices(self) -> int:
        return sum(dt.count for dt in self.device_types)

    def devices(self) -> list[DeviceType]:
        """One entry per device (device ``d`` is the ``d``-th of this list)."""
        return [dt for dt in self.device_types for _ in range(dt.count)]

    def device_labels(self) -> list[str]:
        """Readable device names: ``accelerator0``, ``accelerator1``, ``cpu0`` ...; one
        number sequence per type name, so two entries of one type (a spec's ``devices:
        [{type: A100-80GB, count: 2}, {type: A100-80GB, count: 2, memory_gib: 40}]``)
        give four distinct names, not ``A100-80GB0`` twice (QA round 12)."""
        seen: dict[str, int] = {}
        out = []
        for dt in self.device_types:
            first = seen.get(dt.name, 0)
            out += [f"{dt.name}{first + i}" for i in range(dt.count)]
            seen[dt.name] = first + dt.count
        return out

    def consumers(self) -> list[np.ndarray]:
        """Consumers of each node's output (distinct, ascending)."""
        out: list[list[int]] = [[] for _ in range(self.num_nodes)]
        from autopar_opt.core.ideals import unique_rows

        for u, v in unique_rows(self.edges).tolist():
            out[int(u)].append(int(v))
        return [np.asarray(c, dtype=np.int64) for c in out]

    def with_devices(self, device_types: list[DeviceType]) -> "PlacementProblem":
        """The same graph on other devices."""
        return PlacementProblem(self.name, self.node_names, self.node_ids, self.edges, self.time,
                                self.size_bytes, self.comm, self.color, self.is_backward,
                                device_types, dict(self.meta))
