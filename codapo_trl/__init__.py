"""codapo-trl: CoDaPO (Confidence and Difficulty-adaptive Policy Optimization) for TRL."""

__version__ = "0.1.0"
