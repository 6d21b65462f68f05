"""The package as users get it: typed (py.typed shipped), every public name documented."""

from __future__ import annotations

import dataclasses
import importlib.resources
import inspect

import docket_agent as da


def test_the_package_ships_its_type_marker() -> None:
    assert importlib.resources.files("docket_agent").joinpath("py.typed").is_file()


def test_every_public_name_and_method_says_why() -> None:
    undocumented = []
    for name in da.__all__:
        value = getattr(da, name)
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue  # type aliases (Action, Confidence...) are documented where defined
        if not (value.__doc__ or "").strip() or (inspect.isclass(value) and dataclasses.is_dataclass(value)
                                                 and value.__doc__.startswith(f"{name}(")):
            undocumented.append(name)
        if inspect.isclass(value):
            for member, attr in vars(value).items():
                if member.startswith("_") or not callable(attr) and not isinstance(attr, (property, classmethod)):
                    continue
                if not (inspect.getdoc(getattr(value, member)) or "").strip():
                    undocumented.append(f"{name}.{member}")
    assert undocumented == []
