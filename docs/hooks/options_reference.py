"""MkDocs hook: fills `reference/options.md` with every reward type's options.

The tables are generated from the same typed options models that `rewardlab.build`, the CLI and
the server validate configs with (`rewardlab.rewards.options`), so the reference cannot drift
from the code. A reward type whose options cannot be read fails the build: an options page that
silently lacks a reward is worse than none.
"""

from __future__ import annotations

from typing import Any

from mkdocs.exceptions import PluginError

PAGE = "reference/options.md"
MARKER = "<!-- options-tables -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise PluginError(f"{PAGE} lost its {MARKER} marker: the option tables have nowhere to go")
    return markdown.replace(MARKER, options_tables())


def options_tables() -> str:
    """One section per registered reward type: a table of option, type, default, description."""
    try:
        from rewardlab import available
        from rewardlab.rewards.options import options_schema
    except ImportError as error:
        raise PluginError(f"cannot generate the options reference: {error}") from error
    sections = []
    for kind in available():
        try:
            schema = options_schema(kind)
        except Exception as error:
            raise PluginError(f"options of reward type {kind!r}: {type(error).__name__}: {error}") from error
        sections.append(_section(kind, schema))
    if not sections:
        raise PluginError("rewardlab.available() names no reward types")
    return "\n\n".join(sections) + "\n"


def _section(kind: str, schema: dict[str, Any]) -> str:
    lines = [f"## `{kind}`", ""]
    if schema.get("description"):
        lines += [_one_line(schema["description"]), ""]
    lines += _table(schema, f"reward type {kind!r}")
    definitions = schema.get("$defs", {})
    for name in sorted(_referenced(schema, definitions)):
        lines += ["", f"### `{name}` ({kind})", ""]
        if definitions[name].get("description"):
            lines += [_one_line(definitions[name]["description"]), ""]
        lines += _table(definitions[name], f"{kind}: {name}", described=False)
    return "\n".join(lines)


def _table(schema: dict[str, Any], where: str, *, described: bool = True) -> list[str]:
    """The options table; with ``described``, an option without a description fails the build
    (every option of a reward type has one; nested types may come from elsewhere)."""
    properties = schema.get("properties")
    if not properties:
        return ["No options."]
    required = set(schema.get("required", ()))
    rows = ["| option | type | default | description |", "|---|---|---|---|"]
    for name, field in properties.items():
        if described and not field.get("description"):
            raise PluginError(f"{where}: option {name!r} has no description")
        if name in required:
            default = "required"
        elif "default" in field:
            default = _cell(_code(_yaml(field["default"])))
        else:
            default = "—"
        rows.append(f"| `{name}` | {_type(field)} | {default} | {_cell(field.get('description', ''))} |")
    return rows


def _referenced(schema: dict[str, Any], definitions: dict[str, Any]) -> set[str]:
    """The names of the `$defs` that `schema` refers to, directly or through other definitions."""
    found: set[str] = set()
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith("#/$defs/"):
                name = reference.removeprefix("#/$defs/")
                if name not in found and name in definitions:
                    found.add(name)
                    pending.append(definitions[name])
            pending.extend(value for key, value in node.items() if key != "$defs")
        elif isinstance(node, list):
            pending.extend(node)
    return found


def _type(field: dict[str, Any]) -> str:
    return _cell(_type_text(field))


def _type_text(field: dict[str, Any]) -> str:
    if "$ref" in field:
        return field["$ref"].rsplit("/", 1)[-1]
    if "const" in field:
        return _code(_yaml(field["const"]))
    if "enum" in field:
        return " or ".join(_code(_yaml(value)) for value in field["enum"])
    for key in ("anyOf", "oneOf"):
        if key in field:
            return " or ".join(dict.fromkeys(_type_text(option) for option in field[key]))
    kind = field.get("type")
    if kind == "array":
        items = field.get("items")
        if isinstance(items, dict) and items:
            return f"list of {_type_text(items)}"
        prefix = field.get("prefixItems")
        if prefix:
            return "[" + ", ".join(_type_text(item) for item in prefix) + "]"
        return "list"
    if kind == "object":
        values = field.get("additionalProperties")
        if isinstance(values, dict) and values:
            return f"mapping of {_type_text(values)}"
        return "mapping"
    if isinstance(kind, list):
        return " or ".join(kind)
    return {"null": "null", None: "any"}.get(kind, kind)


def _yaml(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else text


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")
