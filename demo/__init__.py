"""The clone's demos (scripts/demo.sh, scripts/ui.sh): run from a checkout on its example DAGs, never installed.

    airflow_demo.py  `python -m demo.airflow_demo`: the example DAGs with dag.test() on the embedded default
    ui_server.py     `python -m demo.ui_server`: Airflow's API server (UI and the Transactions page) on the demo's home

The core-only demo a pip user can run too stays in the package (`python -m airflow_txn.demo`).
"""
