"""``slotdiff lint``: a config linter for pre-commit, with budgets and slot-change reports.

One stage per module, data flowing one way:

    document    bytes → JSON → RawConfig → Architecture → fills → cost, each on first use
    registry    the rule table (schemas/rules.json), @rule, selection by code prefix
    rules       SD1xx / SD2xx: what one config says (schema, consistency, spelling)
    budgets     SD301-SD305: the policy's budgets and allowed fills, priced by the cost pass
    diffmode    SD310-SD315: slot changes against a git revision or a baseline, with deltas
    policy      [tool.slotdiff] / .slotdiff.toml, validated by schemas/policy.schema.json
    engine      rules over files → frozen Diagnostics sorted by (line, col, code)
    reporters   text, json, sarif, github

Python use: ``engine.lint(paths, policy.load())`` returns a Run whose ``exit_code`` is what
the command exits with.
"""
