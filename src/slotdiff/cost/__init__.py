"""The cost pass: pure functions of (Architecture, Workload) giving params, bytes, FLOPs, time."""
