"""The CI path: the matrix filter between the shared generator and the build jobs (`matrix`, the
release gate) and the GitHub workflows rendered from the policy (`workflow`)."""
