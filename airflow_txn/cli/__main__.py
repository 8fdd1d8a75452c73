"""`python -m airflow_txn.cli`: the same as the `airflow-txn` console script."""

from __future__ import annotations

import sys

from airflow_txn.cli import main

if __name__ == "__main__":
    sys.exit(main())
