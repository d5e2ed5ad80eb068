"""Offline scoring: a file of rollouts in, one JSONL score record per row out (``rewardlab score``).

`open_rows` reads JSONL, Parquet or a saved Hugging Face dataset into `Sample`s; `score_file`
runs a reward over them in concurrent batches, appending records as batches finish so a killed
run can resume by id; `Summary` counts statuses and averages values and breakdown components.
"""

from rewardlab.errors import InputError, OutputError
from rewardlab.offline.rows import Columns, Row, RowError, RowSource, open_rows
from rewardlab.offline.runner import RunOptions, ascore_rows, score_file
from rewardlab.offline.summary import Summary, summary_path

__all__ = [
    "Columns",
    "InputError",
    "OutputError",
    "Row",
    "RowError",
    "RowSource",
    "RunOptions",
    "Summary",
    "ascore_rows",
    "open_rows",
    "score_file",
    "summary_path",
]
