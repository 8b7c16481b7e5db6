"""From a Relax module to a planning problem and back.

``lowering`` runs TVM's pipeline up to the point where every operator output is an explicit
allocation (and, once a plan is written, the rest of it); ``extract`` turns those allocations
into a planning problem, ``kernel_accesses`` and ``kernel_temps`` look inside fused kernels
(what they read and write, the temporaries they hold), ``rewrites`` proves which tensors may
share memory (in place, concat elision), ``reorder`` searches an operator order that needs
less, ``variants`` and ``strategy`` plan one function under one strategy, ``apply`` and
``noalias`` write the plan back as one arena, ``stock`` reads TVM's own plan as offsets,
``peak`` and ``files`` say what a plan holds. ``workspace`` counts TVM's workspace pool.

Nothing here builds or runs a module: that is :mod:`planner.tvm.build`.
"""
