"""Builders for language-model recipes: corpus, model, BPTT batches, perplexity evaluator, update rule."""

from __future__ import annotations

import math

import numpy as np

from embreg.data import TextCorpus, load_enwiki, load_text_files
from embreg.errors import ConfigError
from embreg.models import LSTMLanguageModel
from embreg.recipes.lm_schema import LMRecipeConfig
from embreg.regularizers.dropout import (
    DropoutK,
    ExplicitDropoutRegularizer,
    ImplicitDropoutNoise,
    TwoMaskDropoutNoise,
    UpdateRule,
    dropout_k_noise_scale,
    dropout_variance,
)
from embreg.regularizers.base import standard_objective
from embreg.train.lm_batches import BPTTBatches
from embreg.train.lm_eval import PerplexityEvaluator

ANALYTIC = ("explicit", "explicit_xi")
"""Techniques that replace the model's dropout (the model is built without it)."""


def load_corpus(cfg: LMRecipeConfig) -> TextCorpus:
    """The corpus of ``cfg.data`` (a registry dataset or the user's three files), truncated as configured."""
    d = cfg.data
    if d.paths is not None:
        corpus = load_text_files(*d.paths, min_count=d.min_count, max_vocab=d.max_vocab)
    elif d.dataset == "enwiki-gensim":
        corpus = load_enwiki(fractions=tuple(d.split), seed=d.split_seed, min_count=d.min_count,
                             max_vocab=d.max_vocab, max_articles=d.max_articles)
    else:
        raise ConfigError(f"data.dataset={d.dataset!r} holds no text; use 'enwiki-gensim' or set data.paths")
    limits = {"train": d.max_train_tokens, "valid": d.max_eval_tokens, "test": d.max_eval_tokens}
    for split, limit in limits.items():
        if limit is not None:
            corpus.splits[split] = corpus.splits[split][:limit]
    return corpus


def build_lm(cfg: LMRecipeConfig, vocab_size: int) -> LSTMLanguageModel:
    """The LSTM LM; analytic techniques get a model without dropout (their terms replace it)."""
    m, q = cfg.model, cfg.dropout
    use_dropout = cfg.technique.name not in ANALYTIC
    probs = dict(q_embedding=q.embedding, q_input=q.input, q_hidden=q.hidden, q_output=q.output, q_weight=q.weight)
    if not use_dropout:
        probs = {key: 0.0 for key in probs}
    # the analytic regularisers differentiate the LSTM's backward pass: the unrolled LSTM makes that much cheaper
    return LSTMLanguageModel.build(vocab_size, m.emb_dim, m.hidden_dim, m.layers, proj_dim=m.proj_dim, tie=m.tie,
                                   init_range=m.init_range, learn_init=m.learn_init, unroll=not use_dropout, **probs)


def _site_values(cfg: LMRecipeConfig, fixed: float | None, from_q) -> dict[str, float]:
    """Coefficient per site group: ``fixed`` everywhere, else ``from_q(q)`` of that site's dropout probability."""
    groups = cfg.dropout.per_site_group()
    if cfg.model.layers == 1:
        groups.pop("hidden")  # a one-layer LSTM has no between-layer site
    chosen = cfg.technique.sites if cfg.technique.sites is not None else [g for g, q in groups.items() if q > 0]
    unknown = [s for s in chosen if s not in groups]
    if unknown:
        raise ConfigError(f"technique.sites has {unknown}; this LSTM LM's site groups are {sorted(groups)}")
    out = {}
    for group in groups:
        if group not in chosen:
            out[group] = 0.0
        elif fixed is not None:
            out[group] = fixed
        else:
            out[group] = from_q(groups[group]) if groups[group] > 0 else 0.0
    return out


def build_update_rule(cfg: LMRecipeConfig) -> UpdateRule:
    """The objective and regularisers of ``cfg.technique`` (see :class:`TechniqueConfig`)."""
    t = cfg.technique
    struct = t.structure
    explicit = _site_values(cfg, t.lambda1, dropout_variance)
    noise = _site_values(cfg, t.lambda2, lambda q: math.sqrt(dropout_variance(q)))
    if t.name == "standard":
        return UpdateRule(standard_objective, [])
    if t.name == "dropout_k":
        return UpdateRule(DropoutK(t.k), [])
    if t.name == "dropout_k_two_mask":
        return UpdateRule(DropoutK(t.k), [TwoMaskDropoutNoise(t.k)])
    if t.name == "dropout_k_xi":
        scale = dropout_k_noise_scale(t.k)
        return UpdateRule(DropoutK(t.k), [ImplicitDropoutNoise({g: v * scale for g, v in noise.items()},
                                                               sites=list(noise), structure=struct)])
    regs = [ExplicitDropoutRegularizer(explicit, sites=list(explicit), form=t.form, samples=t.samples,
                                       structure=struct)]
    if t.name == "explicit_xi":
        regs.append(ImplicitDropoutNoise(noise, sites=list(noise), structure=struct))
    return UpdateRule(standard_objective, regs)


def build_lm_batches(cfg: LMRecipeConfig, corpus: TextCorpus) -> BPTTBatches:
    d = cfg.data
    return BPTTBatches(corpus.splits["train"], d.batch_size, d.bptt, variable_length=d.variable_bptt,
                       seed=cfg.train.seed)


def build_lm_evaluator(cfg: LMRecipeConfig, corpus: TextCorpus) -> PerplexityEvaluator:
    d = cfg.data
    splits: dict[str, np.ndarray] = {name: corpus.splits[name] for name in ("valid", "test")}
    return PerplexityEvaluator(splits, batch_size=d.eval_batch_size, bptt=d.bptt)
