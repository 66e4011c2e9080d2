"""CPU–device cooperative pattern matching for SASE+ (thesis §4.3.5): NFA^b's partial matches
in dense arrays per state, checked and propagated by a pass on the CPU or on an OpenCL device
(:mod:`situflow.devices`), compacted and turned into results on the CPU."""
