"""``gpu-audit diag``: active GPU tests (memory patterns, bandwidths, matmul throughput, peer
access, sustained load) run by torch in child processes and judged against the GPU model.

- :mod:`.worker`, :mod:`.probes`, :mod:`.memtest`: the child process and its tests (torch).
- :mod:`.supervise`, :mod:`.runner`: starting the workers with deadlines; the run.
  :mod:`.lifeline`: a worker dies with gpu-audit, also when gpu-audit is killed outright.
- :mod:`.judge`, :mod:`.sustain`, :mod:`.catalogue`, :mod:`.results`: pure judging and its data.
- :mod:`.render`, :mod:`.plots`: the document, the report and the level-3 plots.
"""
