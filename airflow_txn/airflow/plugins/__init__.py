"""The Airflow plugin and what it brings into Airflow's own processes: AirflowTxnPlugin, the rollback
listener, the operators' extra links and the Transactions page.

    plugin.py     AirflowTxnPlugin (entry point `airflow.plugins`, provider info `plugins`)
    listener.py   a failed DAG run or task rolls back the run's active transactions
    links.py      the operators' extra links ("Transaction", "Spark UI"; provider info `extra-links`)
    web/          the Transactions page, a FastAPI app the API server mounts at `/airflow-txn`

Importing this package imports nothing.
"""
