"""codapo-trl: CoDaPO (Confidence and Difficulty-adaptive Policy Optimization) for TRL."""

from .config import CoDaPOConfig
from .trainer import CoDaPOTrainer


__version__ = "0.1.0"

__all__ = ["CoDaPOConfig", "CoDaPOTrainer"]
