"""Mixed fleets: groups of homogeneous nodes joined by links (issue 34).

A *group* is an ordinary :class:`~autopar_opt.ir.hardware.Cluster`: one device
type, ``nodes`` nodes of ``gpus_per_node`` GPUs, its intra-node link and its
inter-node link (the per-GPU share of its nodes' NICs). A :class:`Fleet` is a
tuple of groups and the links between them; a homogeneous cluster is the fleet
of one group (:meth:`Fleet.of`), and everything priced on a one-group fleet is
priced exactly as on the cluster itself.

Every cost function prices a stage on its own group's cluster (catalog peak,
HBM, fitted efficiency of that device, its link tiers). Traffic between two
groups crosses the sending group's NICs, the link between the groups and the
receiving group's NICs: its tier is the slowest link on that path
(:meth:`Fleet.path_tier`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from autopar_opt.ir.hardware import Cluster, LinkTier


@dataclass(frozen=True)
class GroupLink:
    """The link between groups ``a`` and ``b`` (names): ``tier`` holds its per-GPU
    bandwidth (GB/s, the unit of every :class:`LinkTier`: what one GPU's ring
    traffic sees crossing it) and its latency."""

    a: str
    b: str
    tier: LinkTier


@dataclass(frozen=True)
class Fleet:
    """Groups of homogeneous nodes (each a :class:`Cluster`) and the links between them.

    Group ``g`` is ``groups[g]``; its name is ``groups[g].name`` (unique).
    Every pair of groups a plan may connect needs a link (:meth:`missing_links`).
    """

    name: str
    groups: tuple[Cluster, ...]
    links: tuple[GroupLink, ...] = ()
    source: str = ""

    @classmethod
    def of(cls, cluster: Cluster) -> "Fleet":
        """The one-group fleet of a homogeneous cluster."""
        return cls(cluster.name, (cluster,), (), cluster.source)

    @property
    def num_devices(self) -> int:
        return sum(g.num_devices for g in self.groups)

    @property
    def names(self) -> list[str]:
        return [g.name for g in self.groups]

    def index(self, name: str) -> int:
        """Index of the group called ``name`` (ValueError naming the groups)."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"fleet {self.name} has no group {name!r} "
                             f"(groups: {', '.join(self.names)})") from None

    def link(self, g: int, h: int) -> GroupLink | None:
        """The stated link between groups ``g`` and ``h`` (None when none)."""
        a, b = self.groups[g].name, self.groups[h].name
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        return None

    def missing_links(self) -> list[tuple[str, str]]:
        """Pairs of groups without a stated link."""
        return [(self.groups[g].name, self.groups[h].name)
                for g, h in combinations(range(len(self.groups)), 2) if self.link(g, h) is None]

    def path_tier(self, g: int, h: int) -> LinkTier:
        """The tier of traffic between a GPU of group ``g`` and one of group ``h``.

        Same group: its inter-node tier as one GPU sees it (``inter_node_per_gpu``).
        Different groups: the slowest link on the path (sender's NIC share, the
        link, receiver's NIC share; each side's NICs shared by its GPUs):
        bandwidth the minimum of the three, latency the link's plus the larger
        of the two groups' inter-node latencies (each end's NIC and switch hop).
        Raises ValueError when the two groups have no link.
        """
        if g == h:
            return self.groups[g].inter_node_per_gpu
        link = self.link(g, h)
        if link is None:
            raise ValueError(f"no link between groups {self.groups[g].name} and "
                             f"{self.groups[h].name} of fleet {self.name}")
        a, b = self.groups[g].inter_node_per_gpu, self.groups[h].inter_node_per_gpu
        bw = min(a.bandwidth_gb_per_s, b.bandwidth_gb_per_s, link.tier.bandwidth_gb_per_s)
        lat = link.tier.latency_us + max(a.latency_us, b.latency_us)
        return LinkTier(f"path:{self.groups[g].name}-{self.groups[h].name}", bw, lat)

    def slowest_path(self, groups: list[int] | tuple[int, ...]) -> LinkTier | None:
        """The slowest path tier between any two of ``groups`` (None for fewer than
        two): the link a collective spanning them is bound by."""
        pairs = [self.path_tier(g, h) for g, h in combinations(sorted(set(groups)), 2)]
        if not pairs:
            return None
        return min(pairs, key=lambda t: (t.bandwidth_gb_per_s, -t.latency_us))

    def sub(self, groups: list[int] | tuple[int, ...]) -> "Fleet":
        """The fleet of some of the groups (in the given order), with the links among them."""
        chosen = tuple(self.groups[g] for g in groups)
        names = {c.name for c in chosen}
        links = tuple(link for link in self.links if link.a in names and link.b in names)
        return Fleet("+".join(c.name for c in chosen), chosen, links, self.source)


def group_cluster(cluster: "Cluster | Fleet", group: int) -> Cluster:
    """The homogeneous cluster a stage of ``group`` runs on (a plain cluster is group 0)."""
    if isinstance(cluster, Fleet):
        return cluster.groups[group]
    if group != 0:
        raise ValueError(f"cluster {cluster.name} is one group; a plan names group {group}")
    return cluster
