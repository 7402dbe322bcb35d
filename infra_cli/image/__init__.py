"""Reading container images without a daemon and judging what they carry (MPI, verbs, NCCL)."""
