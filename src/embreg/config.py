"""Strict typed configuration: dataclasses built from YAML mappings, with helpful errors.

A config is a (possibly nested) dataclass. :func:`from_dict` builds one from the plain mapping a YAML recipe
gives, checking every value against the field's type and rejecting unknown keys with a suggestion of the
closest valid key, so a misspelt ``lrr: 0.1`` never silently falls back to a default. :func:`to_dict` turns a
config back into plain data, :func:`load_yaml` reads a recipe file and :func:`apply_overrides` applies
``--set a.b.c=value`` strings from the command line.

Example:
    >>> from dataclasses import dataclass, field
    >>> @dataclass
    ... class Train:
    ...     lr: float = 0.01
    ...     epochs: int = 10
    >>> @dataclass
    ... class Run:
    ...     train: Train = field(default_factory=Train)
    >>> data = apply_overrides({"train": {"epochs": 3}}, ["train.lr=1e-3"])
    >>> from_dict(Run, data)
    Run(train=Train(lr=0.001, epochs=3))
    >>> to_dict(from_dict(Run, data))
    {'train': {'lr': 0.001, 'epochs': 3}}
"""

import copy
import dataclasses
import difflib
import math
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

from embreg.errors import ConfigError

T = TypeVar("T")

__all__ = ["from_dict", "to_dict", "load_yaml", "apply_overrides"]


# ----------------------------------------------------------------------------------------------------------------
# from_dict


def from_dict(cls: type[T], data: Mapping[str, Any], *, path: str = "") -> T:
    """Build the dataclass ``cls`` from a plain mapping, checking keys and types.

    Supported field types: ``int``, ``float`` (ints and numeric strings such as ``"1e-3"`` accepted, because
    PyYAML reads ``1e-3`` as a string), ``bool``, ``str``, ``pathlib.Path`` (from a string), ``Literal[...]``,
    unions such as ``X | None``, ``list[X]``, ``tuple[X, ...]``, ``tuple[X, Y]``, ``dict[K, X]``, ``Any`` and
    nested dataclasses. Bools are not accepted as ints or floats. Fields absent from ``data`` take their
    defaults. ``ValueError`` raised by a dataclass's ``__post_init__`` is re-raised as :class:`ConfigError`
    with the key path prefixed. For unions of several types the members are tried in order, first without
    coercion (so ``"1e-3"`` stays a string for ``str | float``), then with it.

    Args:
        cls: the dataclass type to build.
        data: the mapping, e.g. a section of a YAML recipe.
        path: dotted key prefix used in error messages (``"train"`` for the ``train:`` section).

    Returns:
        An instance of ``cls``.

    Raises:
        ConfigError: unknown or misspelt key (with the closest valid key), wrong type (naming the key, the
            expected type and the value), missing required key, or invalid value rejected by ``__post_init__``.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Train:
        ...     lr: float
        ...     batch_size: int = 256
        >>> from_dict(Train, {"lr": "1e-3"})
        Train(lr=0.001, batch_size=256)
        >>> from_dict(Train, {"lrr": 0.1}, path="train")
        Traceback (most recent call last):
        ...
        embreg.errors.ConfigError: unknown config key 'train.lrr'; did you mean 'train.lr'? Valid keys under 'train': batch_size, lr
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"from_dict needs a dataclass type, got {cls!r}")
    if not isinstance(data, Mapping):
        where = f"config key {path!r}" if path else "config"
        raise ConfigError(f"{where} expects a mapping for {cls.__name__}, got {_describe(data)}")

    hints = _field_types(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in data:
        if key not in fields:
            raise ConfigError(_unknown_key_message(key, sorted(fields), path))

    kwargs: dict[str, Any] = {}
    for name, field in fields.items():
        key = _join(path, name)
        if name in data:
            kwargs[name] = _convert(hints[name], data[name], key, coerce=True)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"missing required config key {key!r} ({_type_name(hints[name])})")
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        if not path:
            raise
        raise ConfigError(f"{path}: {exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}" if path else str(exc)) from exc


def _field_types(cls: type) -> dict[str, Any]:
    try:
        return get_type_hints(cls)
    except NameError as exc:
        # String annotations (``from __future__ import annotations``) naming a class local to a function
        # cannot be resolved from the module's globals.
        raise TypeError(f"cannot resolve the field types of {cls.__name__}: {exc}; define it at module level") from exc


def _convert(tp: Any, value: Any, key: str, *, coerce: bool) -> Any:
    """Check ``value`` against the annotation ``tp`` and return it converted (tuples, floats, nested dataclasses)."""
    if tp is Any:
        return value
    if isinstance(tp, type) and hasattr(tp, "__config_from__"):
        # Registry-backed sections (``{name: ..., **args}``) validate themselves against their registry entry.
        return value if isinstance(value, tp) else tp.__config_from__(value, key)
    if tp is type(None):
        if value is None:
            return None
        raise _type_error(key, tp, value)
    origin = get_origin(tp)
    if origin is Literal:
        return _convert_literal(tp, value, key)
    if origin is Union or origin is types.UnionType:
        return _convert_union(tp, value, key, coerce=coerce)
    if origin is list or tp is list:
        return [_convert(_arg(tp, 0), v, f"{key}[{i}]", coerce=coerce) for i, v in enumerate(_sequence(tp, value, key))]
    if origin is tuple or tp is tuple:
        return _convert_tuple(tp, value, key, coerce=coerce)
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise _type_error(key, tp, value)
        key_tp, value_tp = get_args(tp) or (Any, Any)
        return {
            _convert(key_tp, k, key, coerce=False): _convert(value_tp, v, _join(key, str(k)), coerce=coerce)
            for k, v in value.items()
        }
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return value if isinstance(value, tp) else from_dict(tp, value, path=key)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _type_error(key, tp, value)
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _type_error(key, tp, value)
    if tp is float:
        return _convert_float(value, key, coerce=coerce)
    if tp is str:
        if isinstance(value, str):
            return value
        raise _type_error(key, tp, value)
    if tp is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise _type_error(key, tp, value)
    raise TypeError(f"config key {key!r} has a field type from_dict does not support: {tp!r}")


class _NotFinite(ConfigError):
    """A float setting given as nan or inf: reported as it is, also inside unions (``float | None``)."""


def _convert_float(value: Any, key: str, *, coerce: bool) -> float:
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif coerce and isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            pass
    if number is None:
        raise _type_error(key, float, value)
    if not math.isfinite(number):  # no setting means anything by nan or inf; they would fail mid-training
        raise _NotFinite(f"config key {key!r} must be a finite number, got {value!r}")
    return number


def _convert_literal(tp: Any, value: Any, key: str) -> Any:
    choices = get_args(tp)
    # ``type(...) is`` so that True does not match Literal[1] nor 1 match Literal[True].
    for choice in choices:
        if type(value) is type(choice) and value == choice:
            return choice
    message = f"config key {key!r} expects one of {', '.join(map(repr, choices))}, got {_describe(value)}"
    if isinstance(value, str):
        close = difflib.get_close_matches(value, [c for c in choices if isinstance(c, str)], n=1)
        if close:
            message += f"; did you mean {close[0]!r}?"
    raise ConfigError(message)


def _convert_union(tp: Any, value: Any, key: str, *, coerce: bool) -> Any:
    members = get_args(tp)
    if value is None and type(None) in members:
        return None
    candidates = [m for m in members if m is not type(None)]
    if len(candidates) == 1:
        only = candidates[0]
        if get_origin(only) is not None or dataclasses.is_dataclass(only) or hasattr(only, "__config_from__"):
            # Containers and sections report the inner key that went wrong, which says more.
            return _convert(only, value, key, coerce=coerce)
        try:
            return _convert(only, value, key, coerce=coerce)
        except _NotFinite:
            raise
        except ConfigError:
            raise _type_error(key, tp, value) from None
    for allow_coercion in (False, True) if coerce else (False,):
        for member in candidates:
            try:
                return _convert(member, value, key, coerce=allow_coercion)
            except _NotFinite:
                raise
            except ConfigError:
                continue
    raise _type_error(key, tp, value)


def _convert_tuple(tp: Any, value: Any, key: str, *, coerce: bool) -> tuple:
    items = _sequence(tp, value, key)
    args = get_args(tp)
    if not args:
        return tuple(items)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_convert(args[0], v, f"{key}[{i}]", coerce=coerce) for i, v in enumerate(items))
    if len(items) != len(args):
        raise ConfigError(
            f"config key {key!r} expects {_type_name(tp)} ({len(args)} items), got {len(items)} items: {_short(value)}"
        )
    return tuple(_convert(a, v, f"{key}[{i}]", coerce=coerce) for i, (a, v) in enumerate(zip(args, items)))


def _sequence(tp: Any, value: Any, key: str) -> Sequence:
    if isinstance(value, (list, tuple)):
        return value
    raise _type_error(key, tp, value)


def _arg(tp: Any, index: int) -> Any:
    args = get_args(tp)
    return args[index] if args else Any


# ----------------------------------------------------------------------------------------------------------------
# messages


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _unknown_key_message(key: Any, valid: list[str], path: str) -> str:
    full = _join(path, str(key))
    message = f"unknown config key {full!r}"
    suggestion = _closest(str(key), valid)
    if suggestion is not None:
        message += f"; did you mean {_join(path, suggestion)!r}?"
    where = f"under {path!r}" if path else "at the top level"
    listing = ", ".join(valid) if valid else "(none)"
    return f"{message} Valid keys {where}: {listing}"


def _closest(key: str, valid: list[str]) -> str | None:
    lowered = {v.lower(): v for v in valid}
    if key.lower() in lowered:
        return lowered[key.lower()]
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    return close[0] if close else None


def _type_name(tp: Any) -> str:
    if tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is Literal:
        return f"Literal[{', '.join(map(repr, args))}]"
    if origin is Union or origin is types.UnionType:
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{getattr(origin, '__name__', repr(origin))}[{inner}]"
    return getattr(tp, "__name__", repr(tp))


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {_short(value)}"


def _type_error(key: str, tp: Any, value: Any) -> ConfigError:
    return ConfigError(f"config key {key!r} expects {_type_name(tp)}, got {_describe(value)}")


# ----------------------------------------------------------------------------------------------------------------
# to_dict


def to_dict(obj: Any) -> dict[str, Any]:
    """Turn a config dataclass (or a mapping) into plain, YAML/JSON-serialisable data.

    Nested dataclasses become dicts, tuples become lists, paths become strings. Fields declared with
    ``init=False`` are left out, so ``from_dict(type(cfg), to_dict(cfg)) == cfg``.

    Args:
        obj: a dataclass instance or a mapping.

    Returns:
        A new dict of plain values.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Data:
        ...     ks: tuple[int, ...] = (1, 5)
        >>> to_dict(Data())
        {'ks': [1, 5]}
    """
    if not ((dataclasses.is_dataclass(obj) and not isinstance(obj, type)) or isinstance(obj, Mapping)):
        raise TypeError(f"to_dict needs a dataclass instance or a mapping, got {type(obj).__name__}")
    return _plain(obj, "")


def _plain(value: Any, key: str) -> Any:
    if hasattr(value, "__config_to__"):
        return value.__config_to__()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), _join(key, f.name)) for f in dataclasses.fields(value) if f.init}
    if isinstance(value, Mapping):
        return {str(k): _plain(v, _join(key, str(k))) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"config value {key!r} of type {type(value).__name__} is not plain data: {_short(value)}")


# ----------------------------------------------------------------------------------------------------------------
# YAML files and overrides


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""


def _construct_mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r} (first defined on line {seen[key].start_mark.line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping_without_duplicates)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file whose top level is a mapping.

    An empty file gives ``{}``. Duplicate keys in one mapping are an error (plain PyYAML would keep the last).

    Args:
        path: the file to read.

    Returns:
        The parsed mapping.

    Raises:
        ConfigError: the file is missing or unreadable, has a YAML syntax error (the message names the file,
            line and column) or a duplicate key, or its top level is not a mapping.

    Example:
        >>> import tempfile, os
        >>> with tempfile.TemporaryDirectory() as d:
        ...     p = os.path.join(d, "r.yaml")
        ...     _ = open(p, "w").write("train:\\n  lr: 1e-3\\n")
        ...     load_yaml(p)
        {'train': {'lr': '1e-3'}}
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {str(path)!r}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: {exc}") from exc
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"YAML error in {str(path)!r}{where}: {problem}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at the top level, got {type(data).__name__}")
    return data


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a nested config mapping, returning a new dict.

    Each value is parsed with ``yaml.safe_load``, so ``0.01``, ``true``, ``[1, 2]`` and ``null`` mean what they
    do in a recipe; an empty value (``a=``) is ``null``. A numeric key part indexes a list
    (``regularizers.0.weight=2``). Missing intermediate mappings (or ``null`` ones) are
    created. Keys are not checked here: :func:`from_dict` rejects unknown keys later with a suggestion.

    Args:
        data: the config mapping; not modified.
        overrides: strings ``"dotted.key=value"``, applied in order.

    Returns:
        A deep copy of ``data`` with the overrides applied.

    Raises:
        ConfigError: an override has no ``=``, an empty key or key part, a value that is not valid YAML, or
            descends into a value that is not a mapping.

    Example:
        >>> apply_overrides({"train": {"lr": 0.1}}, ["train.lr=0.01", "model.dims=[8, 16]"])
        {'train': {'lr': 0.01}, 'model': {'dims': [8, 16]}}
    """
    if isinstance(overrides, str):
        raise ConfigError(f"overrides must be a list of 'key=value' strings, got the single string {overrides!r}")
    result = copy.deepcopy(dict(data))
    for override in overrides:
        if not isinstance(override, str) or "=" not in override:
            raise ConfigError(f"malformed override {override!r}; expected 'dotted.key=value', e.g. 'train.lr=0.01'")
        raw_key, raw_value = override.split("=", 1)
        parts = raw_key.strip().split(".")
        if any(not part.strip() for part in parts):
            raise ConfigError(f"malformed override {override!r}: empty key part in {raw_key.strip()!r}")
        parts = [part.strip() for part in parts]
        try:
            value = yaml.safe_load(raw_value)
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {override!r}: value {raw_value!r} is not valid YAML ({exc})") from exc
        node: Any = result
        for depth, part in enumerate(parts[:-1]):
            prefix = ".".join(parts[: depth + 1])
            if isinstance(node, list):
                node = node[_list_index(node, part, override, prefix)]
                continue
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, (dict, list)):
                raise ConfigError(
                    f"override {override!r}: {prefix!r} holds {_describe(child)}, not a mapping, so it has no sub-keys"
                )
            node = child
        if isinstance(node, list):
            node[_list_index(node, parts[-1], override, raw_key.strip())] = value
        else:
            node[parts[-1]] = value
    return result


def _list_index(items: list, part: str, override: str, prefix: str) -> int:
    """The list position a key part names (``regularizers.0.weight``: part ``"0"``)."""
    if not part.lstrip("-").isdigit() or not -len(items) <= int(part) < len(items):
        raise ConfigError(
            f"override {override!r}: {prefix!r} indexes a list of {len(items)} items; use 0..{len(items) - 1}"
        )
    return int(part)
