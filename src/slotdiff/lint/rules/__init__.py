"""The config rules (SD1xx errors, SD2xx warnings), one module per kind of question: keys
(parse, schema, spelling, stale keys), values (sizes that must agree), family (model_type,
custom code) and checkpoint (the weights beside the config). Importing this package registers
every rule with the registry."""

from . import checkpoint, family, keys, values  # noqa: F401  (importing registers the rules)
