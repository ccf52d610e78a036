"""The expression language of the data files, in both of its dialects (``expr.py``).

The key map's dialect (``schema.evaluate``) reads an unknown value as None and lets it
propagate; the vision towers' dialect (``vision_spec.evaluate``) refuses it. Every expected
value below is worked out by hand from Python's semantics and the rules the two docstrings
state, not copied from the evaluator's output.
"""

from __future__ import annotations

import pytest

from slotdiff.schema import expr
from slotdiff.schema import keymap as schema
from slotdiff.schema import tower_spec as vision_spec
from slotdiff.schema.keymap import UnsupportedExpression
from slotdiff.schema.tower_spec import ExprError

keymap = schema.evaluate
vision = vision_spec.evaluate


# ------------------------------------------------------------------ key map: None propagates


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("d_model // n_heads", {"d_model": 4096, "n_heads": 32}, 128),
        ("qk_nope_head_dim + qk_rope_head_dim", {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64}, 192),
        ("2 * d_ff", {"d_ff": 11008}, 22016),
        ("a / b", {"a": 7, "b": 2}, 3.5),
        ("a % b", {"a": 7, "b": 3}, 1),
        ("-a", {"a": 3}, -3),
        ("i > 0 and i % 4 == 0", {"i": 8}, True),
        ("(i + 1) % 6 != 0", {"i": 5}, False),
        ("0 < i < n", {"i": 2, "n": 4}, True),
        ("0 < i < n", {"i": 5, "n": 4}, False),
        ("'parallel' if p else 'pre'", {"p": True}, "parallel"),
        ("'parallel' if p else 'pre'", {}, "pre"),
        ("True", {}, True),
        ("None", {}, None),
        ("int(a)", {"a": 3.7}, 3),
        ("ceil(a / b)", {"a": 7, "b": 2}, 4),
        ("len(a)", {"a": [1, 2, 3]}, 3),
        ("uniform(a)", {"a": [4, 4, 4]}, 4),
        ("uniform(a)", {"a": [4, 5]}, None),
        ("uniform(a)", {"a": []}, None),
        ("uniform(a)", {"a": 5}, 5),
    ],
)
def test_keymap_values(text: str, env: dict, expected: object) -> None:
    got = keymap(text, env)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("text", "env"),
    [
        ("a + b", {"a": 1}),  # b unknown
        ("a * 2", {"a": None}),
        ("-a", {}),
        ("missing < 3", {}),  # ordering on None
        ("0 < i < n", {"i": 2}),  # the second link reads an unknown n
        ("int(a)", {}),  # functions map None to None
        ("ceil(a)", {"a": None}),
        ("len(a)", {}),
        ("uniform(a)", {}),
        ("a / 0", {"a": 7}),  # division by zero: unknown, not an error
        ("a // b", {"a": 7, "b": 0}),
        ("a % b", {"a": 7, "b": 0}),
        ("a / b", {"a": 7, "b": 0.0}),
        ("unknown", {}),
    ],
)
def test_keymap_unknown_gives_none(text: str, env: dict) -> None:
    assert keymap(text, env) is None


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("x == None", {}, True),
        ("x is None", {}, True),
        ("x is not None", {"x": 0}, True),
        ("x != 3", {}, True),
        ("a == b", {}, True),  # both unknown: equality looks at None as Python does
        ("a if a is not None else 7", {}, 7),
        ("not x", {}, True),
    ],
)
def test_keymap_equality_is_and_conditionals_see_none(text: str, env: dict, expected: object) -> None:
    got = keymap(text, env)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("a and b", {"a": 0, "b": 5}, 0),  # the falsy operand itself, not False
        ("a or b", {"a": 0, "b": "x"}, "x"),
        ("a or b", {"a": "", "b": 0}, 0),
        ("a and b", {"a": 3, "b": [1]}, [1]),
        ("a or b * c", {"a": 5, "b": "s", "c": 3}, 5),  # b * c would raise: never reached
        ("a and b * c", {"a": 0, "b": "s", "c": 3}, 0),
        ("a if a else b.c", {"a": 1}, 1),  # an unsupported branch not taken never fails
    ],
)
def test_keymap_bool_ops_short_circuit_and_return_an_operand(text: str, env: dict, expected: object) -> None:
    got = keymap(text, env)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("text", "env", "shown"),
    [
        ("a * b", {"a": "ab", "b": 3}, "'ab'"),
        ("a * b", {"a": 3, "b": [1]}, "[1]"),
        ("x * n", {"x": "a", "n": 10**12}, "'a'"),  # never a terabyte of repetition
        ("a + b", {"a": "x", "b": "y"}, "'x'"),  # left operand reported first
        ("a - 1", {"a": {"k": 1}}, "{'k': 1}"),
        ("a * 2", {"a": "x" * 100}, "'" + "x" * 39),  # the value's repr, cut to 40 characters
    ],
)
def test_keymap_arithmetic_is_numbers_only(text: str, env: dict, shown: str) -> None:
    with pytest.raises(TypeError) as info:
        keymap(text, env)
    assert str(info.value) == f"{shown} is not a number"


def test_keymap_booleans_are_numbers() -> None:
    assert keymap("a + b", {"a": True, "b": 2}) == 3


# Constructs neither dialect allows: attribute access, lambdas, calls to anything outside
# the function table, bit operators, unary plus, f-strings, dicts, comprehensions, bytes.
OUTSIDE_BOTH = [
    "a.b",
    "a.__class__",
    "lambda: 1",
    "(lambda x: x)(1)",
    "open('x')",
    "__import__('os')",
    "eval('1')",
    "a & b",
    "+a",
    "f'{a}'",
    "{a: 1}",
    "[x for x in a]",
    "b'x'",
]


@pytest.mark.parametrize(
    "text",
    [
        *OUTSIDE_BOTH,
        "a ** 2",  # no power in the key map
        "max(a, b)",  # a vision function, not a key-map one
        "int(a, 2)",  # one argument only
        "int()",
        "int(x=a)",
        "[a, b]",
        "(a, b)",
        "a[0]",
        "a in b",
        "~a",
    ],
)
def test_keymap_unsupported_constructs(text: str) -> None:
    with pytest.raises(UnsupportedExpression, match="unsupported expression"):
        keymap(text, {"a": 1, "b": 2})
    assert issubclass(UnsupportedExpression, ValueError)  # a data-file bug, not the config's


def test_keymap_parse_error_is_a_syntax_error() -> None:
    with pytest.raises(SyntaxError):
        keymap("a +", {})


def test_keymap_expression_names_exclude_functions() -> None:
    assert expr.expression_names("int(a * b) + ceil(c) if d is None else e") == {"a", "b", "c", "d", "e"}


# ------------------------------------------------------------------ vision towers: strict


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("(image_size // patch_size) ** 2 + 1", {"image_size": 336, "patch_size": 14}, 577),
        ("channels * patch_size * patch_size", {"channels": 3, "patch_size": 14}, 588),
        ("hidden * 4", {"hidden": 1152}, 4608),
        ("2 ** 64", {}, 18446744073709551616),
        ("2 ** -1", {}, 0.5),
        ("a ** b", {"a": 3, "b": -64}, 3**-64),
        ("a / b", {"a": 7, "b": 2}, 3.5),
        ("-a", {"a": 5}, -5),
        ("true", {}, True),
        ("True", {}, True),
        ("false", {}, False),
        ("true", {"true": 0}, True),  # a fixed name, not read from the env
        ("x == 'default'", {"x": "default"}, True),
        ("1 < a < 3", {"a": 2}, True),
        ("x in [1, 2]", {"x": 2}, True),
        ("x not in ['cls', 'patch']", {"x": "full"}, True),
        ("[a, b][1]", {"a": 3, "b": 4}, 4),
        ("(a, b)", {"a": 3, "b": 4}, [3, 4]),  # tuples read as lists
        ("x[1]", {"x": [3, 4]}, 4),
        ("x[-1]", {"x": [3, 4]}, 4),
        ("min(a, b)", {"a": 3, "b": 5}, 3),
        ("max(a, b, 4)", {"a": 3, "b": 5}, 5),
        ("isqrt(a)", {"a": 17}, 4),
        ("count(x)", {"x": [1, 2, 3]}, 3),
        ("count(x)", {"x": 7}, 1),
        ("count(None)", {}, 0),
        ("round(a)", {"a": 2.5}, 2),
        ("abs(a)", {"a": -3}, 3),
        ("int(a)", {"a": 7.9}, 7),
        ("len(x)", {"x": [1, 2]}, 2),
        ("a if a else b.c", {"a": 1}, 1),  # an unsupported branch not taken never fails
    ],
)
def test_vision_values(text: str, env: dict, expected: object) -> None:
    got = vision(text, env)
    assert got == expected and type(got) is type(expected)


def test_vision_round_takes_no_digits_argument() -> None:
    # round(x, -2**40) would build a 2^40-digit number, so the language's round is round(x)
    # only; a small digits argument shows it (Python's round(12345, -2) is 12300).
    with pytest.raises(TypeError):
        vision("round(a, b)", {"a": 12345, "b": -2})


@pytest.mark.parametrize("value", [5, 4096.0, True, False, None, [1, 2]])
def test_vision_non_strings_are_their_own_value(value: object) -> None:
    assert vision(value, {}) is value


def test_vision_unknown_name_is_an_error() -> None:
    with pytest.raises(ExprError) as info:
        vision("hidden * 2", {})
    assert str(info.value) == "unknown name 'hidden' in 'hidden * 2'"


def test_vision_null_name_is_an_error() -> None:
    with pytest.raises(ExprError) as info:
        vision("hidden * 2", {"hidden": None})
    assert str(info.value) == "hidden is unknown"


@pytest.mark.parametrize(
    ("text", "exponent"),
    [("2 ** 65", "65"), ("2 ** -65", "-65"), ("a ** b", "100"), ("a ** b", "64.5")],
)
def test_vision_exponent_is_capped_at_64(text: str, exponent: str) -> None:
    env = {"a": 10, "b": float(exponent) if "." in exponent else int(exponent)}
    with pytest.raises(ExprError) as info:
        vision(text, env)
    assert str(info.value) == f"{text!r}: exponent {exponent} out of range"


@pytest.mark.parametrize("text", ["a / 0", "a // b", "a % b", "a / c"])
def test_vision_division_by_zero_raises(text: str) -> None:
    with pytest.raises(ZeroDivisionError):
        vision(text, {"a": 7, "b": 0, "c": 0.0})


@pytest.mark.parametrize(
    ("text", "env", "shown"),
    [
        ("hidden * n", {"hidden": "ab", "n": 3}, "'ab'"),
        ("x * n", {"x": "a", "n": 10**12}, "'a'"),
        ("[1] * 3", {}, "[1]"),
        ("a + b", {"a": [1], "b": "s"}, "[1]"),  # left operand reported first
    ],
)
def test_vision_arithmetic_is_numbers_only(text: str, env: dict, shown: str) -> None:
    with pytest.raises(ExprError) as info:
        vision(text, env)
    assert str(info.value) == f"{text!r}: {shown} is not a number"


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("a and b", {"a": 0, "b": 5}, False),  # a bool, not the operand
        ("a or b", {"a": 0, "b": 5}, True),
        ("a and b", {"a": 2, "b": 5}, True),
        ("a or b", {"a": "", "b": []}, False),
    ],
)
def test_vision_bool_ops_give_a_bool(text: str, env: dict, expected: bool) -> None:
    assert vision(text, env) is expected


def test_vision_bool_ops_read_every_operand() -> None:
    with pytest.raises(ExprError, match="unknown name 'b'"):
        vision("a and b", {"a": 0})  # False already, yet b is still read
    with pytest.raises(ZeroDivisionError):
        vision("a or 1 / 0", {"a": 1})


@pytest.mark.parametrize(
    "text",
    [
        *OUTSIDE_BOTH,
        "ceil(a)",  # a key-map function, not a vision one
        "uniform(a)",
        "max(a, key=b)",
        "a[0:1]",
    ],
)
def test_vision_unsupported_constructs(text: str) -> None:
    with pytest.raises(ExprError) as info:
        vision(text, {"a": [1, 2], "b": 2})
    assert str(info.value) == f"unsupported expression {text!r}"
    assert issubclass(ExprError, ValueError)


@pytest.mark.parametrize("text", ["a is None", "a is not b"])
def test_vision_has_no_identity_tests(text: str) -> None:
    with pytest.raises(ExprError) as info:
        vision(text, {"a": 1, "b": 2})
    assert str(info.value) == f"unsupported comparison in {text!r}"


def test_vision_parse_error_is_an_expr_error() -> None:
    with pytest.raises(ExprError) as info:
        vision("a +", {"a": 1})
    assert str(info.value) == "cannot parse 'a +'"
    assert isinstance(info.value.__cause__, SyntaxError)


# ------------------------------------------------------------------ the shared compiler


def test_each_expression_is_compiled_once_per_dialect() -> None:
    dialect = expr.Dialect(functions={}, error=ValueError)
    compiled = expr.compiler(dialect)
    assert compiled("a + 1") is compiled("a + 1")
    assert compiled("a + 1")({"a": 2}) == 3
    assert expr.compiler(dialect)("a + 1") is not compiled("a + 1")  # a fresh cache per compiler


def test_dialects_share_one_parse() -> None:
    assert expr.parse("a + 1") is expr.parse("a + 1")
