"""Runs: scenarios, trials, estimates, counterfactual comparisons and calibration."""
