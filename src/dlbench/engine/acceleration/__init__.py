"""Acceleration: CUDA graphs, torch.compile and its caches, cuDNN's search, attention kernels
and precision, each chosen or measured per point."""
