"""diptych.Client against docs/openapi.yaml: every route the client's table
names is an operation of the document, under the same method, and every
operation of the document has a client method (the probes excepted); each
method calls its route."""
from __future__ import annotations

import inspect
import os
import re

import yaml

import diptych
from diptych.client import Client

SPEC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "openapi.yaml")
# For load balancers and orchestrators, not for clients.
PROBES = {("GET", "/livez"), ("GET", "/readyz")}


def client_routes() -> list[tuple[str, str, str]]:
    doc = diptych.client.__doc__ or ""
    return re.findall(r"``(GET|POST|PATCH|PUT|DELETE) (\S+)``\s+:meth:`Client\.(\w+)`", doc)


def test_client_covers_every_operation() -> None:
    with open(SPEC, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    operations = {(method.upper(), path) for path, item in spec["paths"].items()
                  for method in item if method in ("get", "post", "put", "patch", "delete")}
    routes = client_routes()
    assert routes, "the client's route table is empty"
    assert {(m, p) for m, p, _ in routes} == operations - PROBES


def test_each_method_calls_its_route() -> None:
    for method, path, name in client_routes():
        source = inspect.getsource(getattr(Client, name))
        # `{id}` is an f-string's `{self._id(take)}` in the source, `{n}` an `{int(index)}`.
        pattern = re.sub(r"\\\{[a-z]+\\\}", r"{[^}]+}", re.escape(path))
        assert re.search(pattern, source), f"{name} does not call {path}"
        assert f'"{method}"' in source, f"{name} does not use {method}"
