"""The paper experiments, one function each; ``python -m streamfit`` runs them."""
from .pca import (adversarial_regret, comparator_regret, dense_regret, loglog_slope,
                  noise_comparison, pca_trial_time, stochastic_regret)
from .quantile import (format_table, least_squares_comparison, offline_comparison,
                       parameter_sensitivity, plot_paths, regret_dynamics,
                       stepsize_comparison, stepsize_paths)

__all__ = ["adversarial_regret", "noise_comparison", "stochastic_regret", "dense_regret",
           "comparator_regret", "pca_trial_time", "loglog_slope", "stepsize_comparison", "stepsize_paths", "offline_comparison",
           "least_squares_comparison", "parameter_sensitivity", "regret_dynamics",
           "format_table", "plot_paths"]
