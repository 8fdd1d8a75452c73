"""The engine: the Warehouse and Transaction handles and the protocols they run (begin, stage, commit,
apply, roll back, recover, retry, vacuum, compact), built on the catalog, the storage root and the oracle.

Spark and Airflow adapters reach it through `airflow_txn.core.adapter` (docs/ARCHITECTURE.md)."""
