"""Models: each takes its built parts (embeddings, transforms) as constructor arguments."""

from embreg.models.bpr import BPR
from embreg.models.dlrm import DLRM
from embreg.models.mf import BiasedMF
from embreg.models.mlp import mlp
from embreg.models.ncf import NCF
from embreg.models.output import ModelOutput

__all__ = ["BPR", "BiasedMF", "DLRM", "ModelOutput", "NCF", "mlp"]
