"""The one registry: every task, model, embedding kind, index transform, objective and regulariser by name.

Each technique declares a typed config dataclass beside its own code and registers a builder under a *slot* and a
name (as peft registers its tuners). Everything a user or a test lists is read from here: ``embreg list``, the
recipe grammar (``regularizers: [{name: r3f, ...}]`` looks ``r3f`` up in the ``regularizer`` slot), the test
matrix that runs every regulariser on every model that offers what it needs, and the study runner.

Slots:

=================  ==========================================================================================
``task``           a task adapter: data, batches, evaluator, monitor (rating, ranking, ctr, lm, classification)
``model``          a model builder (mf, bpr, ncf, dlrm, lstm-lm, encoder-classifier)
``embedding``      how embedding tables are built (uniform, md)
``index_transform`` ids -> ids on one id kind (sse-se, sse-graph, label-sse)
``objective``      replaces the standard loss (standard, dropout-k, distill)
``regularizer``    hooks ``prepare``/``penalty``/``after_backward`` (lnsr, r3f, smart, l2sp, mixout, ...)
``analysis``       a study's extra tables and plots from its run log (:mod:`embreg.studies.analyses`)
``baseline``       a non-neural reference system learnt and scored on a recipe's data (lexicon)
=================  ==========================================================================================

*Capabilities* make the matrix explicit: a technique ``requires`` some (``layer_stack``: the model can re-run its
layers from a perturbed input; ``dropout_sites``: it exposes its dropout sites; ``linear_layers``; id kinds such
as ``ids:item`` for index transforms), a model ``provides`` them. A recipe that pairs a technique with a model
lacking one of its requirements is refused before anything trains, with the missing capability named.

A model states everything it takes, so that no recipe setting is silently dropped; each keyword is required
(:data:`MODEL_DECLARATIONS`), an empty tuple saying "none":

* ``tasks=(...)``: the tasks it serves;
* ``embeddings=(...)``: the embedding kinds (``embedding`` entries) its tables can be built as;
* ``kinds=(...)``: the id kinds it takes index transforms on (``kinds_for=config -> kinds`` where that depends on
  its config, ``kinds_hint={kind: why}`` to say how to enable one);
* ``provides=(...)``: its capabilities.

:meth:`Entry.accepts` reads them back; ``embreg list`` shows them.

This module is the ground floor: it imports nothing else from embreg but :mod:`embreg.errors`. Built-in entries
register when their modules are imported; :func:`load_builtins` imports every module of
:data:`BUILTIN_PACKAGES`.

Example:
    >>> from dataclasses import dataclass
    >>> reg = Registry()
    >>> @dataclass
    ... class ScaleConfig:
    ...     factor: float = 2.0
    >>> @reg.register("regularizer", "scale", config=ScaleConfig, summary="doubles nothing", reference="none")
    ... def build_scale(cfg, ctx):
    ...     return cfg.factor
    >>> reg.get("regularizer", "scale").build(ScaleConfig(), None)
    2.0
    >>> reg.get("regularizer", "scael")
    Traceback (most recent call last):
    ...
    embreg.errors.ConfigError: unknown regularizer 'scael'; did you mean 'scale'? Registered: scale
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from embreg.errors import ConfigError

__all__ = [
    "SLOTS",
    "Entry",
    "Registry",
    "REGISTRY",
    "register",
    "load_builtins",
    "missing_capabilities",
    "BUILTIN_PACKAGES",
    "MODEL_DECLARATIONS",
]

SLOTS = ("task", "model", "embedding", "index_transform", "objective", "regularizer", "analysis", "baseline")

BUILTIN_TASKS = ("ctr", "lm", "mlm", "multitask", "next_item", "ratings", "tagging", "text", "translation")
"""The task folders of :mod:`embreg.tasks`: each ``embreg/tasks/<name>/task.py`` registers its task adapters (a new
task is one folder and one entry here). Only ``task.py`` is imported; a folder's evaluator, data and serving modules
load when the task uses them."""

BUILTIN_PACKAGES = (
    "embreg.sse",
    "embreg.embeddings",
    "embreg.models",
    "embreg.nn",
    "embreg.regularizers",
    *(f"embreg.tasks.{task}.task" for task in BUILTIN_TASKS),
    "embreg.studies.analyses",
    "embreg.recipes.baselines",
    "embreg.serving.teachers",
)
"""Packages (or single modules) whose modules register the built-in entries beside their own code; every module
in them is imported by :func:`load_builtins`, so a new technique module registers itself without an edit anywhere else."""

MODEL_DECLARATIONS = ("tasks", "embeddings", "kinds", "provides")
"""The keywords every ``model`` registration must give (see the module docstring)."""


@dataclass(frozen=True)
class Entry:
    """One registered name.

    Attributes:
        slot: one of :data:`SLOTS`.
        name: the name recipes use (lower case, dashes).
        config: the dataclass of its arguments (every field has a default, so ``config()`` is a valid setting).
        build: ``build(config, context) -> object``; ``context`` carries what the builder needs from the run
            (sizes, the model, the seed; see :class:`embreg.recipes.context.BuildContext`).
        summary: one line for ``embreg list``.
        reference: paper file and equation/algorithm/section it implements.
        requires: capabilities the model must provide (techniques).
        provides: capabilities a model offers (models), or id kinds a task has (``ids:user``, ...).
        extra: slot-specific metadata (a task's data config and adapter, a model's tiny example, ...).
    """

    slot: str
    name: str
    config: type
    build: Callable[..., Any]
    summary: str
    reference: str = ""
    requires: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def default_config(self) -> Any:
        """The config with every default."""
        return self.config()

    def accepts(self) -> dict[str, Any]:
        """What a model takes: ``{"tasks", "embeddings", "id_kinds", "id_kind_conditions"}`` (empty for other slots).

        ``id_kinds`` are every id kind it can take an index transform on; ``id_kind_conditions`` says, for kinds
        that depend on the model's config, what enables them.

        Example:
            >>> REGISTRY.get("model", "lstm-lm").accepts()["id_kinds"]
            ['token', 'label']
        """
        if self.slot != "model":
            return {}
        return {
            "tasks": list(self.extra.get("tasks", ())),
            "embeddings": list(self.extra.get("embeddings", ())),
            "id_kinds": list(self.extra.get("kinds", ())),
            "id_kind_conditions": dict(self.extra.get("kinds_hint", {})),
        }

    def accepts_line(self) -> str:
        """What a model serves, provides and accepts, on one line (``embreg list``).

        Example:
            >>> REGISTRY.get("model", "lstm-lm").accepts_line()
            'tasks: lm | provides: dropout_sites, layer_stack | accepts embeddings: uniform, md; index transforms on ids: token, label'
        """
        accepts = self.accepts()
        if not accepts:
            return ""
        kinds = ", ".join(accepts["id_kinds"]) or "none"
        conditions = "; ".join(f"{kind}: {why}" for kind, why in accepts["id_kind_conditions"].items())
        return (
            f"tasks: {', '.join(accepts['tasks'])} | provides: {', '.join(self.provides) or 'nothing'} | accepts "
            f"embeddings: {', '.join(accepts['embeddings'])}; index transforms on ids: {kinds}"
            + (f" ({conditions})" if conditions else "")
        )

    def describe(self) -> dict[str, Any]:
        """Plain data for ``embreg list --json`` (models add ``tasks`` and ``accepts``)."""
        fields = {}
        for f in dataclasses.fields(self.config):
            default = (
                f.default
                if f.default is not dataclasses.MISSING
                else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
            )
            fields[f.name] = _plain(default)
        return {
            "slot": self.slot,
            "name": self.name,
            "summary": self.summary,
            "reference": self.reference,
            "requires": list(self.requires),
            "provides": list(self.provides),
            **self._model_description(),
            "arguments": fields,
        }

    def _model_description(self) -> dict[str, Any]:
        if self.slot != "model":
            return {}
        accepts = self.accepts()
        tasks = accepts.pop("tasks")
        return {"tasks": tasks, "accepts": accepts}


class Registry:
    """Name -> :class:`Entry` per slot; lookups suggest the closest name."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Entry]] = {slot: {} for slot in SLOTS}

    def register(
        self,
        slot: str,
        name: str,
        *,
        config: type,
        summary: str,
        reference: str = "",
        requires: Iterable[str] = (),
        provides: Iterable[str] | None = None,
        **extra: Any,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering ``build(config, context)`` under ``slot``/``name``.

        Args:
            provides: capabilities; a ``model`` must give them (``()``: none), as every one of
                :data:`MODEL_DECLARATIONS`.

        Raises:
            ValueError: unknown slot, a config that is not a dataclass with defaults, a name taken twice, or a
                model that leaves out one of :data:`MODEL_DECLARATIONS` or gives one that is not a tuple of names.
        """
        if slot not in SLOTS:
            raise ValueError(f"slot={slot!r} must be one of {SLOTS}")
        if not dataclasses.is_dataclass(config):
            raise ValueError(f"{slot} {name!r}: config must be a dataclass, got {config!r}")
        if slot == "model":
            _check_model_declarations(name, {**extra, "provides": provides})

        def decorate(build: Callable[..., Any]) -> Callable[..., Any]:
            if name in self._entries[slot]:
                raise ValueError(f"{slot} {name!r} is registered twice")
            required = [
                f.name
                for f in dataclasses.fields(config)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            ]
            if required:
                raise ValueError(
                    f"{slot} {name!r}: every field of {config.__name__} needs a default; {required} have none"
                )
            self._entries[slot][name] = Entry(
                slot, name, config, build, summary, reference, tuple(requires), tuple(provides or ()), dict(extra)
            )
            return build

        return decorate

    def get(self, slot: str, name: str) -> Entry:
        """The entry ``name`` of ``slot``.

        Raises:
            ConfigError: no such name (with the closest registered one and the full list).
        """
        entries = self.entries(slot)
        if name in entries:
            return entries[name]
        label = slot.replace("_", " ")
        close = difflib.get_close_matches(str(name), list(entries), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"unknown {label} {name!r}{hint} Registered: {', '.join(sorted(entries)) or '(none)'}")

    def entries(self, slot: str) -> dict[str, Entry]:
        """Every entry of ``slot``, by name (built-ins loaded first)."""
        if slot not in SLOTS:
            raise ValueError(f"slot={slot!r} must be one of {SLOTS}")
        if self is REGISTRY:
            load_builtins()
        return dict(sorted(self._entries[slot].items()))

    def names(self, slot: str) -> list[str]:
        return list(self.entries(slot))


REGISTRY = Registry()
"""The registry every part of embreg reads."""

register = REGISTRY.register

_loaded = False


def load_builtins() -> None:
    """Imports the modules that register embreg's own entries (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for package_name in BUILTIN_PACKAGES:
        package = importlib.import_module(package_name)
        if not hasattr(package, "__path__"):  # a single module
            continue
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            if not info.name.rsplit(".", 1)[-1].startswith("_"):
                importlib.import_module(info.name)


def _plain(value: Any) -> Any:
    """A default value as JSON-ready data (nested config dataclasses become dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _check_model_declarations(name: str, given: dict[str, Any]) -> None:
    """Raises ValueError unless a model registration states every one of :data:`MODEL_DECLARATIONS` as a tuple of
    names (and takes at least one task and one embedding kind)."""
    missing = [key for key in MODEL_DECLARATIONS if given.get(key) is None]
    if missing:
        raise ValueError(
            f"model {name!r} must declare {', '.join(f'{key}=(...)' for key in missing)}: every model states the "
            f"tasks, embedding kinds, id kinds and capabilities it takes (an empty tuple: none), so that no recipe "
            "setting is silently ignored"
        )
    for key in MODEL_DECLARATIONS:
        value = given[key]
        if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"model {name!r}: {key}={value!r} must be a tuple of names")
    for key in ("tasks", "embeddings"):
        if not given[key]:
            raise ValueError(f"model {name!r}: {key}=() is empty; a model serves at least one")


def missing_capabilities(requires: Iterable[str], provides: Iterable[str]) -> list[str]:
    """The requirements not met by ``provides``."""
    offered = set(provides)
    return [need for need in requires if need not in offered]
