"""The TVM boundary: the only modules of the planner that import ``tvm``.

``lowering`` runs TVM's CPU pipeline up to the point where every operator output is an
explicit allocation, ``extract`` turns those allocations into a planning problem, ``apply``
writes a plan back as one arena, and ``execute`` builds, runs and times the result.
"""
