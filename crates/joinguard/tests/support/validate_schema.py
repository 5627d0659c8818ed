#!/usr/bin/env python3
"""Validates one JSON document (stdin) against a schema of docs/schema/ (argv[1]).

A real JSON Schema validator (python3 `jsonschema`, draft 2020-12, with format checks): the
tests call it on the binary's real output. Every schema of the schema's directory is registered
under its `$id`, so the preflight schema's references into trace and update-status resolve
offline. Exit 0 when valid; 1 with every error (path and message) on stderr when not.
"""
import json
import pathlib
import sys

import jsonschema
from referencing import Registry, Resource


def main() -> int:
    schema_path = pathlib.Path(sys.argv[1])
    registry = Registry()
    for path in sorted(schema_path.parent.glob("*.schema.json")):
        doc = json.loads(path.read_text())
        registry = registry.with_resource(doc["$id"], Resource.from_contents(doc))
    schema = json.loads(schema_path.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(
        schema,
        registry=registry,
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )
    instance = json.load(sys.stdin)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    for e in errors:
        path = "/".join(str(p) for p in e.absolute_path) or "(root)"
        print(f"{schema_path.name}: {path}: {e.message}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
