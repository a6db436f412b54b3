"""Online PCA kernels: GOE draws, a warm-started top-k solver, capped-simplex
projections, mixture decomposition and systematic sampling."""
__all__ = []
