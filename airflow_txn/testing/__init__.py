"""Test helpers that start real services (never mocks): `airflow_txn.testing.zookeeper` and
`airflow_txn.testing.postgres` (a private cluster that tests may crash and restart)."""
