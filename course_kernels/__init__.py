"""Reference Triton kernels of the course.

`kernels.flash_attention.attention` is the fused attention (forward and
backward) that students' kernels are timed against in assignment 3. On a
machine without a GPU, import it with TRITON_INTERPRET=1 set in the
environment first: Triton then runs the kernels through its interpreter.
"""
