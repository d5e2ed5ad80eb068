"""Mutants of a correct program that a test suite should catch: used by the HumanEval tests and by
the probe's shipped code rollouts."""

import ast

FLIPPED = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}


def entry_function(module: ast.Module, entry_point: str) -> ast.FunctionDef:
    return next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == entry_point)


def operator_mutant(program: str, entry_point: str) -> str | None:
    """Flip the first comparison, else bump the first integer constant, else swap the first
    + or -, inside the entry point."""
    module = ast.parse(program)
    nodes = list(ast.walk(entry_function(module, entry_point)))
    for node in nodes:
        if isinstance(node, ast.Compare) and type(node.ops[0]) in FLIPPED:
            node.ops[0] = FLIPPED[type(node.ops[0])]()
            return ast.unparse(module)
    for node in nodes:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            node.value += 1
            return ast.unparse(module)
    for node in nodes:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
            node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
            return ast.unparse(module)
    return None
