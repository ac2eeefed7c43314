"""autopar_opt.model_zoo: named models and clusters (data files + builders).

Public API: :func:`list_models`, :func:`build_model`, :func:`list_clusters`,
:func:`get_cluster` (see :mod:`autopar_opt.model_zoo.registry`).
"""

from autopar_opt.model_zoo.registry import (ClusterInfo, ModelInfo, build_model, get_cluster,
                                            list_clusters, list_models, model_dims)

__all__ = ["ClusterInfo", "ModelInfo", "build_model", "get_cluster", "list_clusters",
           "list_models", "model_dims"]
