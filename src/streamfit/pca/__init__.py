"""Online PCA with regret guarantees (Kotlowski & Warmuth, "PCA with Gaussian
perturbations"): Follow the Perturbed Leader with GOE noise and Follow the
Leader, with the GOE generator and the paper's bound as helpers; and the
comparators over the capped simplex, Matrix Exponentiated Gradient and matrix
Gradient Descent, with the projections, mixture decomposition and sampler
they play by."""
from ._capped import (MatrixEGPCA, MatrixGDPCA, mixture_decomposition,
                      project_capped_simplex, systematic_sample)
from ._dropout import DropoutPCA
from ._fpl import (FollowTheLeaderPCA, PerturbedLeaderPCA, auto_sigma, goe_matrix,
                   regret_bound)

__all__ = ["PerturbedLeaderPCA", "FollowTheLeaderPCA", "DropoutPCA", "MatrixEGPCA", "MatrixGDPCA",
           "goe_matrix", "auto_sigma", "regret_bound", "project_capped_simplex",
           "mixture_decomposition", "systematic_sample"]
