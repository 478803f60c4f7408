"""`dlbench peak`: what each GPU attains (dense matmul per dtype, device memory, host and peer
copies) beside its datasheet, one row per GPU, and the fleet check among identical GPUs."""
