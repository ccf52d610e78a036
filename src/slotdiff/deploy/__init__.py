"""Deployment questions over the cost pass: does it fit, sweeps over batch and context, MoE traffic,
speculative decoding, number formats."""
