"""The paper experiments, one function each; ``python -m streamfit`` runs them."""
from .quantile import (format_table, least_squares_comparison, offline_comparison,
                       stepsize_comparison)

__all__ = ["stepsize_comparison", "offline_comparison", "least_squares_comparison",
           "format_table"]
