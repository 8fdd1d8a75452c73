"""The plugin page: a FastAPI app the Airflow 3 API server mounts at `/airflow-txn` (the plugin's
`fastapi_apps`), with a JSON API and a small server-rendered page listing the warehouse's
transactions, per-table readable CSNs and the parts each task staged, and a rollback action.

    app.py    the routes (JSON under /api, the HTML pages)
    data.py   what the routes show, computed from a Warehouse (no FastAPI, no Airflow)
    auth.py   the Airflow user of a request, their permission on a transaction's DAGs and on
              the whole warehouse (the plugin's connection)
    same_origin.py   a state change cannot be forged by another site (bearer token, or cookie + JSON
              from this origin)
    warehouses.py    one open Warehouse per connection configuration per process
    page.py   the HTML, rendered from templates/ (Jinja2, autoescape); static/ holds the style and
              the few lines of vanilla JS (rollback button, watermark poll); no build step
    runs.py   the transactions a DAG run began (its BeginTransactionOperator XComs)

Importing this package imports nothing; the plugin imports `app` on the first request only.
"""
