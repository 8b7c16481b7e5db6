"""What a build really holds and how long it takes, measured.

``memory`` is the measuring process (a preloaded allocation counter, ``memshim.c``), forked
once and handed each build; ``builds`` measures one compile's builds in it while the next
ones build; ``cuda_memory`` counts a CUDA build's device memory (``cudashim.c``); ``remote``
checks and times builds on a board behind TVM RPC; ``native`` builds the C helpers once.

Kept free of imports: the measuring process starts TVM's runtime alone.
"""
