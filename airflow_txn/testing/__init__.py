"""Test helpers that start real services (never mocks): `airflow_txn.testing.zookeeper`."""
