"""Stage 4, the cost pass: pure functions of (Architecture, Workload) giving params, bytes,
FLOPs and time, built on the tensor inventory, and the price of each slot change through its
counterfactual (``price``)."""
