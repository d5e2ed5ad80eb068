"""``rewardlab schema``: the JSON Schema of reward configs, from the options models the rewards
validate with, for a YAML editor to check and complete a config file as it is written.

For yaml-language-server (VS Code's YAML extension), a config file names its schema in a first
line comment::

    # yaml-language-server: $schema=reward.schema.json
"""

from __future__ import annotations

import argparse
import json

from rewardlab.arguments import add_import_argument
from rewardlab.cli.pipeline import import_user_modules
from rewardlab.errors import MissingDependency, UsageError


def add_schema_command(commands: argparse._SubParsersAction) -> None:
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of a reward type's config, or of any reward config",
        description="Print the JSON Schema of a config of reward type TYPE (its options and "
        "`type: TYPE`), or without TYPE of any reward config (one of the registered types). "
        "--list lists the types.",
    )
    schema.add_argument("type", nargs="?", metavar="TYPE", help="a registered reward type (see --list)")
    schema.add_argument("--list", action="store_true", help="list the reward types, one line each")
    add_import_argument(schema)
    schema.set_defaults(run=_schema)


def type_lines() -> list[str]:
    """One line per registered reward type: its name and what it is."""
    from rewardlab.rewards.options import description
    from rewardlab.rewards.registry import available

    kinds = available()
    width = max(len(kind) for kind in kinds)
    lines = []
    for kind in kinds:
        try:
            text = description(kind)
        except MissingDependency as error:
            text = f"(not installed: {error})"
        lines.append(f"{kind:<{width}}  {text}")
    return lines


def _schema(args: argparse.Namespace) -> int:
    from rewardlab.rewards.options import config_schema, options_schema
    from rewardlab.rewards.registry import available

    import_user_modules(args.imports)
    if args.list:
        if args.type is not None:
            raise UsageError("give a TYPE or --list, not both")
        print("\n".join(type_lines()))
        return 0
    if args.type is None:
        print(json.dumps(config_schema(), indent=2))
        return 0
    if args.type not in available():
        listed = "\n".join(f"  {line}" for line in type_lines())
        raise UsageError(f"unknown reward type {args.type!r}; the types are:\n{listed}")
    print(json.dumps(options_schema(args.type), indent=2))
    return 0
