"""Publishing: every commit of a warehouse made readable by other engines as table-format metadata over the
same Parquet files (docs/DESIGN.md, D26; docs/INTEROP.md).

Publishing is "commit, then apply": it never runs on a commit's critical path, it is idempotent, and whoever
finds it behind catches it up (the committing process's background thread, `Warehouse.publish()`,
`airflow-txn publish`). Its progress per table lives in the published table itself, so the airflow_txn catalog
keeps no state for it. `settings` reads the configuration (no optional dependency); `formats` is what every
format shares (the `Format` interface, the change feed read from the catalog); `iceberg` publishes to an Iceberg
catalog through pyiceberg (the `iceberg` extra, D26), `delta` as Delta tables through deltalake (the `delta`
extra, D29); `publisher` runs the configured formats for one Warehouse.
"""
