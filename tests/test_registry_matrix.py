"""One test matrix over the registry: every technique on every model, through the recipe machinery.

The cases are read from :data:`embreg.registry.REGISTRY` when the module is collected, so a new regulariser,
objective, index transform or model is tested without an edit here:

* every ``regularizer`` and ``objective`` entry x every ``model`` entry;
* every ``index_transform`` entry x every (model, id kind) the model consumes (``model.extra["kinds"]`` that its
  task has).

A pairing whose requirements are met is built with :func:`embreg.recipes.run.build_run` from the model's plainest
shipped recipe, shrunk by its task's ``smoke_overrides`` (one place: :class:`embreg.tasks.TaskAdapter`),
on a small slice of the real data, and trained for a few steps with the trainer's own step. The loss must be
finite, every gradient finite and the embedding tables reached, the parameters must move, and a stochastic
technique must change the trajectory. A pairing whose requirements are not met must be refused when the recipe is
loaded, with the missing capability named. An index transform also trains with its draws made on the batch before
the step (``train.index_transforms_on=host``, as on a GPU) and must give the very same run. Runs are pinned to the CPU (``train.device=cpu``), so the random
streams the assertions rely on are the CPU's wherever CUDA is present; tests/gpu covers the families on CUDA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from embreg.errors import ConfigError
from embreg.papers import PAPER_KEYS
from embreg.recipes import load_recipe
from embreg.recipes.run import build_run
from embreg.registry import REGISTRY, SLOTS, missing_capabilities
from embreg.regularizers.embedding_noise import embedding_modules
from embreg.tasks import model_id_kinds
from tests.helpers.pretrained_stub import tiny_pretrained
from tests.helpers.recipes import base_recipe

STEPS = 3
PAPERS = PAPER_KEYS
"""The papers a technique's ``reference`` may name: the keys of :data:`embreg.papers.PAPERS` (docs/papers.md)."""
UNREFERENCED = {"standard", "uniform"}
"""Entries that implement no paper (the plain loss, plain tables)."""


# ------------------------------------------------------------------------------------------------ case discovery


def _task_of(model: str) -> Any:
    return load_recipe(base_recipe(model)).adapter


def _smoke(model: str) -> list[str]:
    return [*_task_of(model).smoke_overrides, "train.device=cpu"]


@dataclass(frozen=True)
class Case:
    slot: str
    name: str
    model: str
    kind: str | None = None

    @property
    def id(self) -> str:
        return f"{self.slot}:{self.name}@{self.model}" + (f"[{self.kind}]" if self.kind else "")

    def overrides(self) -> list[str]:
        if self.slot == "regularizer":
            objectives = self.entry.extra.get("objectives")  # a regulariser that corrects a given objective
            objective = [f"objective={{name: {objectives[0]}}}"] if objectives else []
            return [f"regularizers=[{{name: {self.name}}}]", *objective]
        if self.slot == "objective":
            return [f"objective={{name: {self.name}}}"]
        return [f"index_transforms={{{self.kind}: {{name: {self.name}}}}}"]

    @property
    def entry(self) -> Any:
        return REGISTRY.get(self.slot, self.name)

    def missing(self) -> list[str]:
        """Unmet requirements (a transform's id kind outside its ``kinds`` counts as ``ids:<kind>``)."""
        model = REGISTRY.get("model", self.model)
        missing = missing_capabilities(self.entry.requires, model.provides)
        tasks = self.entry.extra.get("tasks")  # a technique of some tasks only (distillation: classification)
        task = _task_of(self.model).name
        if tasks is not None and task not in tasks:
            missing.append(task)
        kinds = self.entry.extra.get("kinds", ())
        if self.kind is not None and kinds and self.kind not in kinds:
            missing.append(self.kind)
        taken = model_id_kinds(model, load_recipe(base_recipe(self.model)).model.config)
        if self.kind is not None and self.kind not in taken:  # the base recipe's model has no such ids
            missing.append(self.kind)
        return missing


KNOWN_BROKEN: dict[tuple[str, str, str, str | None], str] = {}
"""Pairings that the registry accepts but that fail to build or train: each is a bug in src, named by the reason.
They run as strict xfails, so a fix shows up as an XPASS to remove here."""

IDENTITY_AT_DEFAULTS: dict[tuple[str, str], str] = {
    ("objective", "dropout-k"): "averages the loss over k dropout masks: exactly the plain loss on a model "
    "whose dropout is off, as in these recipes",
}
"""Techniques whose contract makes them the base run at their defaults on some models (may match the base run)."""


def _cases() -> list[Case]:
    models = [m for m in REGISTRY.names("model") if base_recipe(m) is not None]
    cases = [
        Case(slot, name, model)
        for slot in ("regularizer", "objective")
        for name in REGISTRY.names(slot)
        for model in models
    ]
    for model in models:
        kinds = REGISTRY.get("model", model).extra.get("kinds", ())
        task_kinds = _task_of(model).id_kinds
        for kind in (k for k in kinds if k in task_kinds):
            cases += [Case("index_transform", name, model, kind) for name in REGISTRY.names("index_transform")]
    return cases


CASES = _cases()


def _param(case: Case) -> Any:
    reason = KNOWN_BROKEN.get((case.slot, case.name, case.model, case.kind))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, id=case.id, marks=marks)


def test_every_model_has_a_shipped_recipe_to_run_the_matrix_on() -> None:
    assert [m for m in REGISTRY.names("model") if base_recipe(m) is None] == []


# ------------------------------------------------------------------------------------------ encoder checkpoints
@pytest.fixture(scope="module")
def pretrained_stub(tmp_path_factory: pytest.TempPathFactory):
    """``load_pretrained`` answered with a tiny random BERT (:func:`tests.helpers.pretrained_stub.tiny_pretrained`)."""
    yield from tiny_pretrained(tmp_path_factory)


@pytest.fixture
def models_offline(request: pytest.FixtureRequest, case: Case) -> None:
    if "pretrained" in REGISTRY.get("model", case.model).provides:
        request.getfixturevalue("pretrained_stub")


# --------------------------------------------------------------------------------------------------- training
_PREPARED: dict[str, Any] = {}
_BASELINES: dict[str, dict[str, torch.Tensor]] = {}


@dataclass
class Trained:
    losses: list[float]
    grads: dict[str, torch.Tensor | None]
    before: dict[str, torch.Tensor]
    after: dict[str, torch.Tensor]
    tables: list[str]
    drawn_on_host: bool


def _dense(grad: torch.Tensor) -> torch.Tensor:
    return grad.coalesce().values() if grad.is_sparse else grad


def _train(recipe_name: str, overrides: list[str]) -> Trained:
    """Builds the run (sharing the prepared data per recipe) and takes :data:`STEPS` trainer steps."""
    recipe = load_recipe(recipe_name, overrides)
    threads = torch.get_num_threads()
    try:
        built = build_run(recipe, prepared=_PREPARED.get(recipe_name))
        _PREPARED.setdefault(recipe_name, built.prepared)
        trainer = built.trainer(None)
        model = trainer.model
        before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        model.train()
        batches = iter(built.batches.epoch(0))
        losses = [trainer._train_step(next(batches), 0)[0] for _ in range(STEPS)]
        grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
        after = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        tables = [f"{name}.{p}" if name else p for name, m in embedding_modules(model) for p, _ in m.named_parameters()]
        drawn_on_host = trainer._host_draws is not None
        return Trained(losses, grads, before, after, [t for t in tables if t in grads], drawn_on_host)
    finally:
        torch.set_num_threads(threads)


_TEACHERS: dict[str, str] = {}


def _teacher_run(model: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A finished smoke run of the model's base recipe: the teacher of an objective that learns from teacher runs
    (``extra["needs_teachers"]``, e.g. distillation), on the very data the case's run prepares."""
    if model not in _TEACHERS:
        from embreg.recipes.run import run_single

        out = tmp_path_factory.mktemp(f"teacher-{model}")
        run_single(load_recipe(base_recipe(model), [*_smoke(model), "train.keep_checkpoints=best"]), out)
        _TEACHERS[model] = str(out)
    return _TEACHERS[model]


def _baseline(model: str) -> dict[str, torch.Tensor]:
    if model not in _BASELINES:
        _BASELINES[model] = _train(base_recipe(model), _smoke(model)).after
    return _BASELINES[model]


@pytest.mark.integration
@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_technique_on_model(case: Case, models_offline: None, tmp_path_factory: pytest.TempPathFactory) -> None:
    recipe_name = base_recipe(case.model)
    overrides = _smoke(case.model) + case.overrides()
    missing = case.missing()
    if missing:
        with pytest.raises(ConfigError, match=missing[0]):
            load_recipe(recipe_name, overrides)
        return
    if case.entry.extra.get("needs_teachers"):
        teacher = _teacher_run(case.model, tmp_path_factory)
        overrides[-1] = f"objective={{name: {case.name}, teachers: [{teacher}]}}"

    run = _train(recipe_name, overrides)
    assert all(math.isfinite(loss) for loss in run.losses), run.losses
    bad = [n for n, g in run.grads.items() if g is not None and not torch.isfinite(_dense(g)).all()]
    assert bad == [], f"non-finite gradients: {bad}"
    assert run.tables, "the model has no embedding module"
    assert any(run.grads[t] is not None for t in run.tables), f"no embedding table got a gradient: {run.tables}"
    moved = [n for n in run.after if not torch.equal(run.after[n], run.before[n])]
    assert any(t in moved for t in run.tables), "no embedding table moved"
    touched = [n for n, g in run.grads.items() if g is not None]
    assert set(touched) <= set(moved) | {n for n in touched if not _dense(run.grads[n]).any()}

    # the technique at its default setting does something on this model (or is the base run, where its
    # contract says so: the standard objective)
    baseline = _baseline(case.model)
    same = run.after.keys() == baseline.keys() and all(torch.equal(run.after[n], baseline[n]) for n in baseline)
    if case.slot == "objective" and case.name == "standard":
        assert same, "the standard objective must reproduce the base run"
    elif (case.slot, case.name) not in IDENTITY_AT_DEFAULTS:
        assert not same, f"{case.id} at its defaults left training exactly as without it"
    if case.slot == "index_transform":
        # drawn on the CPU batch before the step (as on a GPU, embreg.train.host_draws): the very same swaps
        host = _train(recipe_name, [*overrides, "train.index_transforms_on=host"])
        assert host.drawn_on_host and not run.drawn_on_host
        assert host.losses == run.losses
        assert all(torch.equal(host.after[n], run.after[n]) for n in run.after)


# ---------------------------------------------------------------------------------------------- entry metadata
ENTRIES = [(slot, name) for slot in SLOTS for name in REGISTRY.names(slot)]


@pytest.mark.parametrize(("slot", "name"), ENTRIES, ids=[f"{s}:{n}" for s, n in ENTRIES])
def test_entry_has_defaults_summary_and_reference(slot: str, name: str) -> None:
    entry = REGISTRY.get(slot, name)
    config = entry.default_config()
    assert config == entry.config()
    assert entry.summary.strip()
    if name in UNREFERENCED:
        return
    assert any(paper in entry.reference for paper in PAPERS), (
        f"{slot} {name!r}: reference {entry.reference!r} names none of {PAPERS}"
    )


@pytest.mark.parametrize("slot", SLOTS)
def test_a_misspelt_name_suggests_the_registered_one(slot: str) -> None:
    for name in REGISTRY.names(slot):
        if len(name) < 4:
            continue
        misspelt = name[:-2] + name[-1] + name[-2] if name[-1] != name[-2] else name[:-1]
        with pytest.raises(ConfigError, match=f"did you mean '{name}'"):
            REGISTRY.get(slot, misspelt)
