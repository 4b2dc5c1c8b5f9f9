"""What may stand before a program's line in a log: launchers' and loggers' per-line prefixes.

A signature that reads a program's own printed line from its start (XGBoost's ``- Requested
memory:`` rows, a notebook's ``OutOfMemoryError   Traceback`` header, TensorFlow's ``[[Node:``)
opens with :data:`LINE_HEAD` instead of ``^``, so the same line reads the same behind
whatever relayed it:

- a launcher's per-rank prefix: torchrun's ``[rank1]: ``, ``[default0]:``, Open MPI's
  ``[1,0]<stderr>:``, srun --label's ``3: ``;
- Docker compose's ``trainer-1  | ``;
- a timestamp (Python logging's asctime, ``kubectl logs --timestamps``' RFC 3339, bracketed or
  not), a level (``ERROR``, ``[INFO]``, ``ERROR:root:``), a logger's name between dashes
  (``- train - ERROR - ``);
- glog's ``E1127 12:00:00.123456  1234 file.cc:12] ``;
- syslog's ``Nov 27 12:00:00 node02 program[123]: ``.

Prefixes nest (a launcher relays a program's logging line: up to four of them). Every part is
bounded and starts with a distinct character class, so a line that opens with none of them costs
one failed try at its start. Prose that tells a failure in words is read wherever it stands and
needs none of this.
"""

from __future__ import annotations

_TIMESTAMP = (r"\[?\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?"
              r"(?:Z|[+-]\d\d:?\d\d)?(?: UTC)?\]?")
_LEVEL = r"\[?(?:DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|CRITICAL|FATAL)\]?"
# A launcher's rank on every line of its ranks' output: torchrun's "[rank1]: ", "[default0]:",
# Open MPI's --tag-output "[1,0]<stderr>:" (joining keeps a message's lines together under it).
RANK_PREFIX = r"(?:\[(?:rank|default)\d{1,6}\]|\[\d{1,9},\d{1,6}\]<std(?:out|err)>): ?"

# One prefix, with the separator after it.
LOG_PREFIX = (
    r"(?:"
    # a timestamp, then a logger's name between dashes ("... - train - ")
    rf"{_TIMESTAMP}(?: - [\w.-]{{1,64}})?(?: - |:? ?)"
    # a level, then Python logging's "ERROR:root:" name, or a dash
    rf"|{_LEVEL}(?::[\w.-]{{0,64}}:|:? - |:? ?)"
    # glog's header
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{1,6} +\d+ [\w.-]{1,80}:\d+\] ?"
    # syslog's header
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,64} [\w./-]{1,64}(?:\[\d{1,10}\])?: ?"
    # a launcher's rank, or another bracketed name ("[worker-3]: "), srun --label's "3: "
    rf"|{RANK_PREFIX}|\[[\w.-]{{1,24}}\]: ?|\d{{1,5}}: "
    # Docker compose's service column: "trainer-1  | "
    r"|[\w.-]{1,64} +\| ?"
    r")"
)

# Any prefixes before a program's text (blanks only between them: never past a line's end).
LOG_PREFIXES = rf"(?:{LOG_PREFIX}[ \t]*){{0,4}}"
# Where a program's line starts: the line's start, then any prefixes before the program's text.
LINE_HEAD = rf"^\s*{LOG_PREFIXES}"
