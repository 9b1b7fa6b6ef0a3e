"""calculator: exact arithmetic on an expression, without eval."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from thinkloop.arithmetic import plain
from thinkloop.core.tool import tool

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_FUNCS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max,
    "log": math.log, "exp": math.exp, "sin": math.sin, "cos": math.cos, "tan": math.tan,
}
_CONSTS = {"pi": math.pi, "e": math.e}


def _eval(node: ast.AST) -> Any:
    match node:
        case ast.Expression(body=body):
            return _eval(body)
        case ast.Constant(value=int() | float() as value):
            return value
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            lhs, rhs = _eval(left), _eval(right)
            if isinstance(op, ast.Pow) and abs(rhs) > 10_000:
                raise ValueError("exponent too large")
            return _BINARY[type(op)](lhs, rhs)
        case ast.UnaryOp(op=op, operand=operand) if type(op) in _UNARY:
            return _UNARY[type(op)](_eval(operand))
        case ast.Name(id=name) if name in _CONSTS:
            return _CONSTS[name]
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]) if name in _FUNCS:
            return _FUNCS[name](*(_eval(a) for a in args))
    raise ValueError(f"unsupported expression element: {ast.dump(node)[:80]}")


@tool
def calculator(expression: str) -> str:
    """Evaluate arithmetic in numbers: "15% of 240" is "0.15*240", "root of 144" is "sqrt(144)".

    Everyday forms are read as meant too: "15% of 240", "the square root of 144",
    "7 squared", and unit conversions of time, length, mass and volume ("2.5 km to m",
    "how many minutes in 3 hours").

    Args:
        expression: The arithmetic expression: numbers, + - * / // % **, parentheses,
            sqrt, abs, round, min, max, log, exp, sin, cos, tan, pi, e.
    """
    try:
        value = _eval(ast.parse(plain(expression), mode="eval"))
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from exc
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return str(value)
