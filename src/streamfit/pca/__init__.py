"""Online PCA with regret guarantees (Kotlowski & Warmuth, "PCA with Gaussian
perturbations"): Follow the Perturbed Leader with GOE noise and Follow the
Leader, with the GOE generator and the paper's bound as helpers."""
from ._fpl import (FollowTheLeaderPCA, PerturbedLeaderPCA, auto_sigma, goe_matrix,
                   regret_bound)

__all__ = ["PerturbedLeaderPCA", "FollowTheLeaderPCA", "goe_matrix", "auto_sigma",
           "regret_bound"]
