"""This repository's own memory planner, tracked by Peakwatch like a built-in strategy.

``plan(problem)`` receives a ``planner.Problem`` (buffers with ``id``, ``size``, ``lower``,
``upper`` and ``alignment``) and returns an offset per buffer id. This first version puts
every buffer after the previous one: correct, and as large as it gets.
"""


def plan(problem):
    offsets, top = {}, 0
    for buffer in problem.buffers:
        top = -(-top // buffer.alignment) * buffer.alignment
        offsets[buffer.id] = top
        top += buffer.size
    return offsets
