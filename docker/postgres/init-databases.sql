-- Runs once, when the postgres volume is empty (docker-entrypoint-initdb.d): the image creates the
-- `airflow` database (Airflow's metadata, POSTGRES_DB); this adds `airflow_txn`, the warehouse
-- catalog. Separate databases, one server: the catalog can move to its own server later by
-- changing AIRFLOW_TXN_CATALOG only.
CREATE DATABASE airflow_txn OWNER airflow;
