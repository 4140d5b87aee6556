"""Cost models that rank schedule configs from their features (numpy arrays in, scores out).

Owns: the ``CostModel`` interface and the XGBoost ranking model. Imports no other swtune package:
features come in as arrays.
"""

from cost_model.base import CostModel, throughput_labels
from cost_model.ensemble import BoosterEnsemble
from cost_model.xgb import XGBoostCostModel

__all__ = ["BoosterEnsemble", "CostModel", "XGBoostCostModel", "throughput_labels"]
