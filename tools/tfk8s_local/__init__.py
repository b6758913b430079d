"""Helpers of tools/tfk8s-local: the local Kubernetes cluster (see docs/local-cluster.md)."""
