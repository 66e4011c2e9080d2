"""The generated parts of the Helm chart ``charts/situflow``.

- ``values.schema.json``, ``$defs.settings`` and ``$defs.stream``: the services' settings, from
  :func:`situflow.settings.json_schema`, by camelCase name (``onError`` is ``SITUFLOW_ON_ERROR``,
  which the chart's ``_env.tpl`` derives back from the name). A stream's own keys
  (:data:`STREAM_KEYS`) belong to its entry of ``streams``; the chart sets the keys of
  :data:`CHART_KEYS` itself; every other setting may be in ``settings`` or in a stream's
  ``settings``. The rest of the schema is written by hand.
- ``README.md``, between its ``values`` and ``settings`` markers: the values table, from the
  ``# --`` comment above each key of ``values.yaml`` (every key must have one), and the table of
  the settings.

``python charts/generate.py`` writes them; ``--check`` exits 1 when they are stale
(``tests/ops/test_chart.py`` runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from situflow.settings import AT_LEAST_ONCE, EXACTLY_ONCE, json_schema

CHART = Path(__file__).resolve().parent / "situflow"
SCHEMA = CHART / "values.schema.json"
VALUES = CHART / "values.yaml"
README = CHART / "README.md"

#: Settings that are keys of a stream's entry, by setting name (``stream`` is ``name``).
STREAM_KEYS = {
    "stream": "name",
    "key_fields": "keyFields",
    "unpartitioned": "unpartitioned",
    "partitions": "partitions",
    "slack": "slack",
    "time_field": "timeField",
    "time_unit": "timeUnit",
    "situations_topic": "situationsTopic",
}
#: Settings the chart sets from its own values: data and archive volumes, web address, the
#: registry (always followed), the device (``devices.gpu``); query files are the jobs' way.
CHART_KEYS = {"data_dir", "web_port", "web_bind", "web_advertise", "registry", "query_file", "query_name",
              "archive_dir", "device"}
#: Closed choices that the settings check in a validator rather than by type.
ENUMS = {"processing_guarantee": [AT_LEAST_ONCE, EXACTLY_ONCE]}
#: Schema keywords carried over from the settings' schema.
KEPT = ("type", "enum", "minimum", "maximum", "exclusiveMinimum", "minLength", "items", "default")
#: Kafka topic names (what a stream's name is).
TOPIC_PATTERN = "^[A-Za-z0-9._-]{1,249}$"

VALUES_MARKERS = ("<!-- values:start -->", "<!-- values:end -->")
SETTINGS_MARKERS = ("<!-- settings:start -->", "<!-- settings:end -->")


def camel(name: str) -> str:
    """``fetch_max_wait_ms`` -> ``fetchMaxWaitMs``."""
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _property(name: str, source: dict[str, Any]) -> dict[str, Any]:
    """One setting's schema in values: its type and bounds, its meaning and its variable."""
    options = source.get("anyOf", [source])
    typed = next(option for option in options if option.get("type") != "null")
    prop: dict[str, Any] = {key: typed[key] for key in KEPT if key in typed}
    if "default" in source and source["default"] is not None:
        prop["default"] = source["default"]
    if name in ENUMS:
        prop["enum"] = ENUMS[name]
    if len(options) > 1:  # optional: null unsets it, as an absent key does
        prop["type"] = [prop["type"], "null"]
    prop["description"] = f"{source['description']} ({source['x-env']})"
    prop["x-env"] = source["x-env"]
    return prop


def schema_defs() -> dict[str, Any]:
    """``$defs.settings`` and ``$defs.stream`` of values.schema.json."""
    properties = json_schema()["properties"]
    tunable = {camel(name): _property(name, prop) for name, prop in properties.items()
               if name not in STREAM_KEYS and name not in CHART_KEYS and name != "kafka"
               and not name.startswith("test_")}
    stream = {key: _property(name, properties[name]) for name, key in STREAM_KEYS.items()}
    stream["name"].update(pattern=TOPIC_PATTERN)
    stream["name"].pop("default")
    stream["keyFields"].update(minItems=1, uniqueItems=True)
    stream["keyFields"].pop("default")
    stream["settings"] = {"$ref": "#/$defs/settings",
                          "description": "Settings of this stream's services, over the global settings."}
    return {
        "settings": {
            "type": "object",
            "description": "SITUFLOW_* settings of the services, by camelCase name (generated "
                           "from situflow/settings.py by charts/generate.py).",
            "additionalProperties": False,
            "properties": tunable,
        },
        "stream": {
            "type": "object",
            "description": "An input stream: its topic and its partitioning (generated from "
                           "situflow/settings.py by charts/generate.py).",
            "additionalProperties": False,
            "required": ["name"],
            "properties": stream,
            # Either keyed, or unpartitioned and without keys.
            "if": {"properties": {"unpartitioned": {"const": True}}, "required": ["unpartitioned"]},
            "then": {"not": {"required": ["keyFields"]}},
            "else": {"required": ["keyFields"]},
        },
    }


def schema_text() -> str:
    """values.schema.json with its generated part up to date."""
    schema = json.loads(SCHEMA.read_text())
    schema["$defs"] = schema_defs()
    return json.dumps(schema, indent=2) + "\n"


class UndocumentedKey(ValueError):
    """A key of values.yaml without a ``# --`` comment above it."""


def documented_keys(text: str) -> list[tuple[str, str]]:
    """Each key path of values.yaml outside lists, with its ``# --`` comment as one line (an
    indented example in the comment is left out, a ``ref:`` line becomes a link)."""
    keys: list[tuple[str, str]] = []
    stack: list[tuple[int, str]] = []
    comment: list[str] = []
    in_list_of: int | None = None  # the indent of the key whose list is being skipped
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            comment = []
            continue
        if stripped.startswith("#"):
            comment.append(stripped[1:])
            continue
        if in_list_of is not None and indent > in_list_of:
            comment = []
            continue
        in_list_of = None
        if stripped.startswith("- "):
            in_list_of = stack[-1][0] if stack else -1
            comment = []
            continue
        match = re.match(r"([A-Za-z0-9_.-]+):(\s|$)", stripped)
        if not match:
            comment = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group(1)))
        path = ".".join(key for _, key in stack)
        keys.append((path, _description(comment, path, number)))
        comment = []
    return keys


def _description(comment: list[str], path: str, number: int) -> str:
    starts = [i for i, line in enumerate(comment) if line.startswith(" --")]
    if not starts:
        raise UndocumentedKey(f"values.yaml:{number}: {path} has no '# --' comment above it")
    words: list[str] = []
    for line in comment[starts[-1]:]:
        if line.startswith("   ") or line.strip() == "e.g.:":  # an example: values.yaml shows it
            continue
        text = line.removeprefix(" --").strip()
        if text.startswith("ref:"):
            link = text.removeprefix("ref:").strip()
            words.append(f"[ref]({link})")
        else:
            words.append(text)
    return " ".join(word for word in words if word)


def _lookup(values: dict[str, Any], path: str) -> Any:
    value: Any = values
    for key in path.split("."):
        value = value[key]
    return value


def _type_name(value: Any) -> str:
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "string"),
                       (list, "list"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return "null"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def values_table(text: str) -> str:
    """The README's table of values: one row per key whose value is not a map of keys."""
    values = yaml.safe_load(text)
    rows = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    for path, description in documented_keys(text):
        value = _lookup(values, path)
        if isinstance(value, dict) and value:
            continue
        default = _cell(json.dumps(value))
        rows.append(f"| `{path}` | {_type_name(value)} | `{default}` | {_cell(description)} |")
    return "\n".join(rows)


def settings_table() -> str:
    """The README's table of the keys of ``settings`` (and of a stream's ``settings``)."""
    rows = ["| Key | Variable | Type | Default | Description |",
            "|-----|----------|------|---------|-------------|"]
    for key, prop in schema_defs()["settings"]["properties"].items():
        kind = prop["type"] if isinstance(prop["type"], str) else prop["type"][0]
        if "enum" in prop:
            kind = " or ".join(f"`{choice}`" for choice in prop["enum"])
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        meaning = prop["description"].rsplit(" (", 1)[0]
        rows.append(f"| `{key}` | `{prop['x-env']}` | {kind} | {default} | {_cell(meaning)} |")
    return "\n".join(rows)


def _between(text: str, markers: tuple[str, str], body: str) -> str:
    start, end = markers
    head, found, rest = text.partition(start)
    if not found or end not in rest:
        raise ValueError(f"README.md needs the markers {start} and {end}")
    return f"{head}{start}\n{body}\n{end}{rest.partition(end)[2]}"


def readme_text() -> str:
    """README.md with both tables up to date."""
    text = _between(README.read_text(), VALUES_MARKERS, values_table(VALUES.read_text()))
    return _between(text, SETTINGS_MARKERS, settings_table())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a generated part is stale")
    args = parser.parse_args(argv)
    try:
        outputs = {SCHEMA: schema_text(), README: readme_text()}
    except (UndocumentedKey, ValueError) as exc:
        print(f"charts/generate.py: {exc}", file=sys.stderr)
        return 1
    stale = [path for path, text in outputs.items() if path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(CHART.parent.parent)} is stale: run python charts/generate.py",
                  file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(outputs[path])
    return 0


if __name__ == "__main__":
    sys.exit(main())
