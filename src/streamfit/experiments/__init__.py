"""The two papers' experiments, figure by figure, and the report that runs them.

``python -m streamfit`` runs every experiment below and writes a report folder
(``report.md`` and PNG figures); see :func:`write_report`. Each experiment
module holds one figure or claim: its tasks (pure functions of setting and
seed, run in this process or as Dask tasks, see :func:`open_runner`), its
analysis (tables, a figure drawn like the paper's, and the criteria its
verdict is computed from) and its quick and full presets.

The table functions the tests and benchmarks use (``stepsize_comparison``,
``adversarial_regret``, ...) live in :mod:`streamfit.experiments.quantile` and
:mod:`streamfit.experiments.pca`.
"""
from . import (lowrank, pca_compare, pca_cost, pca_dropout, pca_goe, pca_noise, pca_real,
               pca_scaling, pca_stability, qr_batch, qr_batch_regret, qr_coverage, qr_drift,
               qr_dscan, qr_efficiency, qr_fan, qr_init, qr_least_squares, qr_offline,
               qr_phase_one, qr_real, qr_regret, qr_remark3, qr_sensitivity, qr_sparse,
               qr_squared, qr_stepsizes, qr_storage, qr_table1, qr_tails)
from ._runner import open_runner
from .pca import adversarial_regret, comparator_regret, loglog_slope
from .quantile import format_table, offline_comparison, regret_dynamics, stepsize_comparison
from .report import markdown_table, write_report

#: every experiment of the report, in report order
EXPERIMENTS = tuple(m.EXPERIMENT for m in (
    qr_remark3, qr_stepsizes, qr_phase_one, qr_offline, qr_efficiency, qr_least_squares,
    qr_sensitivity, qr_regret, qr_batch, qr_batch_regret, qr_storage, qr_tails, qr_dscan,
    qr_init, qr_squared, qr_table1, qr_real, qr_fan, qr_drift, qr_sparse, qr_coverage, lowrank,
    pca_goe, pca_scaling, pca_noise, pca_stability, pca_compare, pca_cost, pca_real,
    pca_dropout))


def get_experiment(name):
    """The experiment called ``name`` (see ``EXPERIMENTS``).

    Examples
    --------
    >>> from streamfit.experiments import get_experiment
    >>> get_experiment("qr-fig4").paper
    '001'
    >>> get_experiment("pca-goe").kind
    'paper'
    """
    for exp in EXPERIMENTS:
        if exp.name == name:
            return exp
    raise ValueError(f"unknown experiment {name!r}; known: "
                     f"{', '.join(e.name for e in EXPERIMENTS)}")


__all__ = ["EXPERIMENTS", "get_experiment", "write_report", "open_runner", "markdown_table",
           # the table functions of the tests and benchmarks
           "adversarial_regret", "comparator_regret", "loglog_slope", "stepsize_comparison",
           "offline_comparison", "regret_dynamics", "format_table"]
