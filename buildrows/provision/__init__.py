"""Provisioning what a row needs on this machine: its interpreter and build environment
(`interpreters`, `buildenv`) and its CUDA toolkit (`toolkit`, assembled from `sources` into `cache`)."""
