"""Models: each takes its built parts (embeddings, transforms) as constructor arguments."""

from embreg.models.bpr import BPR
from embreg.models.dlrm import DLRM
from embreg.models.encoder_classifier import EncoderClassifier, encode_texts
from embreg.models.lstm_lm import LSTMLanguageModel
from embreg.models.mf import BiasedMF
from embreg.models.mlp import mlp
from embreg.models.ncf import NCF
from embreg.models.output import ModelOutput
from embreg.models.pretrained import fetch_pretrained, list_pretrained, load_pretrained
from embreg.models.sasrec import SASRec
from embreg.models.transformer_nmt import TransformerTranslator

__all__ = [
    "BPR",
    "BiasedMF",
    "DLRM",
    "EncoderClassifier",
    "encode_texts",
    "fetch_pretrained",
    "list_pretrained",
    "load_pretrained",
    "LSTMLanguageModel",
    "ModelOutput",
    "NCF",
    "SASRec",
    "TransformerTranslator",
    "mlp",
]
