"""Cost-model speed: training on 10,000 records and predicting 100,000 candidates.

    python benchmarks/cost_model_speed.py

Records are real: configs of a ResNet-18 layer measured on the simulator. Medians of 3 runs; last
line one JSON object (train_10k_s <= 2, predict_100k_s <= 1 per issue 3; the prediction figure
includes computing the candidates' features from the analysis).
"""

from __future__ import annotations

import _common  # noqa: F401
import numpy as np
from _common import emit, median_seconds

from cost_model import XGBoostCostModel
from tuner.measure.simulator import simulate
from tuner.models import model_layers
from tuner.search.features import features
from tuner.space.factory import space_for


def main() -> None:
    space = space_for(model_layers("resnet18", 1)[2].workload, "sw26010")
    rng = np.random.default_rng(0)
    train = space.sample(10_000, rng)
    x_train, y_train = features(space, train), simulate(space, train)
    candidates = space.sample(100_000, rng)
    model = XGBoostCostModel()
    train_s = median_seconds(lambda: model.update(x_train, y_train))
    feature_s = median_seconds(lambda: features(space, candidates))
    x_cand = features(space, candidates)
    predict_s = median_seconds(lambda: model.predict(x_cand))
    total_s = median_seconds(lambda: model.predict(features(space, candidates)))
    print(f"train 10k: {train_s:.3f} s; features 100k: {feature_s:.3f} s; predict 100k: {predict_s:.3f} s; "
          f"features + predict: {total_s:.3f} s")
    emit({"train_10k_s": round(train_s, 3), "predict_100k_s": round(total_s, 3),
          "predict_100k_model_only_s": round(predict_s, 3), "features_100k_s": round(feature_s, 3)})


if __name__ == "__main__":
    main()
