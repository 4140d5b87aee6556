"""Calibration: fit a target's simulator profile (tuner/profile.py) to measured times.

The workflow: measurements (:mod:`tuner.calibrate.records` for a user's CSV or hardware results from the
tuning log; :mod:`tuner.calibrate.swdnn` for swDNN's published sweep replayed with swDNN's own schedule)
become a :class:`~tuner.calibrate.model.TimeModel`, a prediction of every measured time as a function of the
profile's parameters. :func:`tuner.calibrate.fit.calibrate` fits the parameters the data can speak to (least
squares on log times), gives each a bootstrap interval, and cross-validates the fit on held-out records.
:mod:`tuner.calibrate.recovery` checks the whole procedure on synthetic records from a hidden profile.
"""
