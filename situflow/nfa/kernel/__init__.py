"""The NFA^b per-event loop compiled with numba (SASE+ §5.2 for partition contiguity and skip
till next match): ``loop`` (the kernel), ``kernel_state`` (its state in arrays, kept across
batches), ``compressed`` (matches in the compressed output mode of §4.2) and ``texts`` (text
values as codes)."""
