"""Online (quantile) regression kernels: check-loss and squared-loss SGD over a
block of rows, and the statistical stepsize schedule as a state object."""
__all__ = []
