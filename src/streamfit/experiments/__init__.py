"""The paper experiments, one function each; ``python -m streamfit`` runs them."""
from .quantile import (format_table, least_squares_comparison, offline_comparison,
                       parameter_sensitivity, plot_paths, regret_dynamics,
                       stepsize_comparison, stepsize_paths)

__all__ = ["stepsize_comparison", "stepsize_paths", "offline_comparison",
           "least_squares_comparison", "parameter_sensitivity", "regret_dynamics",
           "format_table", "plot_paths"]
