"""From a planned module to something that runs: executables, kernel libraries, checks.

``target`` names what a compile builds for, ``kernels`` builds each distinct set of kernels
once and links every plan's executable to it, ``execute`` builds, loads, runs and times,
``planned`` builds one strategy's plan and counts what it holds, ``check`` compares every
build with TVM's stock build and with the framework, ``export`` writes a build as one
``model.so``, ``cuda`` is the CUDA target and its compiler, ``quiet_io`` saves and loads
executables without TVM's noise.

Kept free of imports: the measuring process imports ``quiet_io`` without TVM's compiler.
"""
