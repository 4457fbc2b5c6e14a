"""Validators for plugin ``Config`` classes.

attrs does not check types on its own; these validators do, and their messages name the
key and what was expected, so a bad config fails at plugin load with a usable sentence.
"""

from __future__ import annotations

from typing import Any

import attrs

__all__ = [
    "boolean",
    "non_empty_str",
    "optional_str",
    "positive_int",
    "str_list",
]


def positive_int(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{attribute.name} must be a positive integer, got {value!r}")


def non_empty_str(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string, got {value!r}")


def optional_str(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{attribute.name} must be a non-empty string or null, got {value!r}")


def boolean(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{attribute.name} must be true or false, got {value!r}")


def str_list(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{attribute.name} must be a list of strings, got {value!r}")

