"""The tensor inventory, the bottom of the cost pass: every parameter tensor of a model as a
shape times a count in a named slot part, from which params, weight bytes and FLOPs are summed."""
