"""The one expression language of slotdiff's data files, compiled once per expression.

The key map (``schemas/keymap.json``, ``schemas/model_types/``) and the vision-tower files
(``schemas/vision_types/``, ``schemas/multimodal/``) state sizes and switches as small
Python-syntax expressions: ``d_model // n_heads``, ``(image_size // patch_size) ** 2 + 1``,
``'parallel' if use_parallel_residual else 'pre'``. Nothing in them runs as Python: the
parsed tree is checked node by node against a whitelist and turned into nested closures,
once per expression (the layer layout evaluates some per layer, the cost pass per tensor).

The two users differ in what an unknown value means and in a few constructs, so each
declares a :class:`Dialect`; the compiler below is the only place the language is defined.
Common to every dialect: names, numbers, strings, ``None``/``True``/``False``;
``+ - * / // %`` on numbers only (a config's string or list must never become repetition);
unary ``-`` and ``not``; chained ``== != < <= > >=``; ``and``/``or``; ``a if c else b``; the
dialect's functions, called by name. Anything else raises the dialect's error when it is
reached (not when compiled), so a branch not taken never fails.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

Compiled = Callable[[Mapping[str, Any]], Any]

_ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_DIVIDES = (ast.Div, ast.FloorDiv, ast.Mod)

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_MEMBERSHIP: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


@dataclass(frozen=True, eq=False)  # compared by identity: its function table is a (mutable) dict
class Dialect:
    """What one user of the language allows, and what an unknown (None) value does in it.

    ``strict`` False (the key map): an unknown name reads as None; arithmetic, ordering,
    negation and calls on None give None and division by zero gives None (the result is
    then unknown); a non-number in arithmetic raises TypeError (the config's fault, not
    the data file's); ``and``/``or`` short-circuit and return an operand, like Python.
    ``strict`` True (the vision towers): a name that is absent or None raises ``error``;
    None propagates nowhere and division by zero raises; a non-number, an unsupported
    comparison (reported before its right operand is read) and a parse error raise
    ``error`` naming the expression.
    """

    functions: Mapping[str, Callable[..., Any]]  # callable by name, nothing else is
    error: type[ValueError]  # raised for a construct outside the dialect
    strict: bool = False
    constants: Mapping[str, Any] = field(default_factory=dict)  # bare names with fixed values
    max_exponent: int | None = None  # ``**`` allowed up to this |exponent|; None: not at all
    containers: bool = False  # list/tuple displays (as lists), subscripts, ``in``/``not in``
    identity: bool = False  # ``is`` / ``is not``
    eager_bool: bool = False  # ``and``/``or`` evaluate every operand and give a bool
    call_args: int | None = 1  # arguments every call passes; None: any number


@cache
def parse(expr: str) -> ast.Expression:
    """``expr`` parsed as a Python expression, once (shared by compiling and name listing)."""
    return ast.parse(expr, mode="eval")


@cache
def expression_names(expr: str) -> frozenset[str]:
    """The names an expression reads (called function names excluded); parsed once."""
    tree = parse(expr)
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in calls)


def compiler(dialect: Dialect) -> Callable[[str], Compiled]:
    """A cached ``expr → closure`` function for ``dialect`` (make one per dialect: a str key is fastest)."""

    @cache
    def compiled(expr: str) -> Compiled:
        try:
            tree = parse(expr)
        except SyntaxError as err:
            if dialect.strict:
                raise dialect.error(f"cannot parse {expr!r}") from err
            raise
        return _Compiler(dialect, expr).compile(tree)

    return compiled


class _Compiler:
    """Turns one expression's tree into closures; each does what walking its node would, in order.

    Only ``compile`` recurses (helpers get the children's closures), so a nesting depth
    costs one Python frame per level when compiled and one when run.
    """

    def __init__(self, dialect: Dialect, expr: str) -> None:
        self.dialect = dialect
        self.expr = expr
        error = dialect.error

        def unsupported(env: Mapping[str, Any]) -> Any:
            raise error(f"unsupported expression {expr!r}")

        self.unsupported: Compiled = unsupported

    def compile(self, node: ast.AST) -> Compiled:
        """The closure for ``node``; ``unsupported`` for a construct outside the dialect."""
        d = self.dialect
        if isinstance(node, ast.Expression):
            return self.compile(node.body)
        if isinstance(node, ast.Constant) and (
            node.value is None or isinstance(node.value, (int, float, bool, str))
        ):
            constant = node.value
            return lambda env: constant
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.BinOp):
            op = self._arithmetic(node.op)
            if op is None:
                return self.unsupported
            divides = isinstance(node.op, _DIVIDES)
            return self._binop(op, divides, self.compile(node.left), self.compile(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            operand = self.compile(node.operand)
            return lambda env: not operand(env)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self._negate(self.compile(node.operand))
        if isinstance(node, ast.BoolOp):
            return self._boolop(isinstance(node.op, ast.And), [self.compile(part) for part in node.values])
        if isinstance(node, ast.IfExp):
            test, body, orelse = self.compile(node.test), self.compile(node.body), self.compile(node.orelse)
            return lambda env: body(env) if test(env) else orelse(env)
        if isinstance(node, ast.Compare):
            first = self.compile(node.left)
            comparators = [self.compile(comp) for comp in node.comparators]
            return self._compare(first, list(zip(node.ops, comparators, strict=True)))
        if d.containers and isinstance(node, (ast.List, ast.Tuple)):
            items = [self.compile(e) for e in node.elts]
            return lambda env: [item(env) for item in items]
        if d.containers and isinstance(node, ast.Subscript):
            value, index = self.compile(node.value), self.compile(node.slice)
            return lambda env: value(env)[index(env)]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in d.functions
            and not node.keywords
            and (d.call_args is None or len(node.args) == d.call_args)
        ):
            return self._call(d.functions[node.func.id], [self.compile(a) for a in node.args])
        return self.unsupported

    def _name(self, name: str) -> Compiled:
        """A name: a dialect constant, else the env's value (None or an error when unknown)."""
        d, expr, error = self.dialect, self.expr, self.dialect.error
        if name in d.constants:
            constant = d.constants[name]
            return lambda env: constant
        if not d.strict:
            return lambda env: env.get(name)

        def known(env: Mapping[str, Any]) -> Any:
            if name not in env:
                raise error(f"unknown name {name!r} in {expr!r}")
            if env[name] is None:
                raise error(f"{name} is unknown")
            return env[name]

        return known

    def _arithmetic(self, op: ast.operator) -> Callable[[Any, Any], Any] | None:
        """The function for an arithmetic operator; ``**`` capped where allowed; None if outside."""
        cap, expr, error = self.dialect.max_exponent, self.expr, self.dialect.error
        if isinstance(op, ast.Pow) and cap is not None:

            def power(a: Any, b: Any) -> Any:
                if abs(b) > cap:  # a hostile exponent must not run forever
                    raise error(f"{expr!r}: exponent {b!r} out of range")
                return a**b

            return power
        return _ARITHMETIC.get(type(op))

    def _binop(
        self, op: Callable[[Any, Any], Any], divides: bool, left: Compiled, right: Compiled
    ) -> Compiled:
        """Arithmetic on numbers only: None and division by zero give None unless strict."""
        expr, error = self.expr, self.dialect.error
        if self.dialect.strict:

            def strict_binop(env: Mapping[str, Any]) -> Any:
                a, b = left(env), right(env)
                # Numbers only: a config value that is a string or a list must not turn
                # ``hidden * 4`` into repetition.
                for side in (a, b):
                    if not isinstance(side, (int, float)):
                        raise error(f"{expr!r}: {side!r} is not a number")
                return op(a, b)

            return strict_binop

        def binop(env: Mapping[str, Any]) -> Any:
            a, b = left(env), right(env)
            if a is None or b is None:
                return None
            # Numbers only: a string or list from a config must not turn ``a * b`` into a
            # repetition as long as the other operand (a hostile 10**12) asks.
            for side in (a, b):
                if not isinstance(side, (int, float)):
                    raise TypeError(f"{side!r:.40} is not a number")
            if divides and b == 0:
                return None
            return op(a, b)

        return binop

    def _negate(self, operand: Compiled) -> Compiled:
        """Unary minus (None stays None unless strict)."""
        if self.dialect.strict:
            return lambda env: -operand(env)

        def negate(env: Mapping[str, Any]) -> Any:
            value = operand(env)
            return None if value is None else -value

        return negate

    def _boolop(self, is_and: bool, parts: list[Compiled]) -> Compiled:
        """``and``/``or``: Python's short circuit, or every operand read and a bool given."""
        if self.dialect.eager_bool:

            def eager(env: Mapping[str, Any]) -> bool:
                values = [part(env) for part in parts]
                return all(values) if is_and else any(values)

            return eager
        is_or = not is_and

        def boolop(env: Mapping[str, Any]) -> Any:
            value = None
            for part in parts:
                value = part(env)
                if is_and and not value:
                    return value
                if is_or and value:
                    return value
            return value

        return boolop

    def _compare(self, first: Compiled, pairs: list[tuple[ast.cmpop, Compiled]]) -> Compiled:
        """A comparison chain, left to right, stopping at the first false link."""
        d, expr, error = self.dialect, self.expr, self.dialect.error
        table = {**_COMPARE, **(_MEMBERSHIP if d.containers else {})}
        if d.strict:
            if d.identity:
                table.update({ast.Is: operator.is_, ast.IsNot: operator.is_not})
            strict_steps = [(table.get(type(op)), comp) for op, comp in pairs]

            def strict_compare(env: Mapping[str, Any]) -> Any:
                left = first(env)
                for cmp, comp in strict_steps:
                    if cmp is None:  # reported before its right operand is read
                        raise error(f"unsupported comparison in {expr!r}")
                    right = comp(env)
                    if not cmp(left, right):
                        return False
                    left = right
                return True

            return strict_compare
        # (is, is not, ordering: None gives None, operator or None when unsupported, operand)
        steps = [
            (
                d.identity and isinstance(op, ast.Is),
                d.identity and isinstance(op, ast.IsNot),
                isinstance(op, _ORDERING),
                table.get(type(op)),
                comp,
            )
            for op, comp in pairs
        ]
        unsupported = self.unsupported

        def compare(env: Mapping[str, Any]) -> Any:
            left = first(env)
            for is_, is_not, ordering, cmp, comp in steps:
                right = comp(env)
                if is_:
                    ok = left is right
                elif is_not:
                    ok = left is not right
                elif cmp is not None:
                    if ordering and (left is None or right is None):
                        return None
                    ok = cmp(left, right)
                else:  # outside the dialect: reported once its right operand is read
                    return unsupported(env)
                if not ok:
                    return False
                left = right
            return True

        return compare

    def _call(self, fn: Callable[..., Any], args: list[Compiled]) -> Compiled:
        """A whitelisted function; unless strict, a None argument gives None."""
        if self.dialect.strict:
            return lambda env: fn(*[a(env) for a in args])
        if len(args) == 1:
            arg_of = args[0]

            def call(env: Mapping[str, Any]) -> Any:
                arg = arg_of(env)
                return None if arg is None else fn(arg)

            return call

        def call_many(env: Mapping[str, Any]) -> Any:
            values = [a(env) for a in args]
            return None if any(v is None for v in values) else fn(*values)

        return call_many
