"""Helpers of the Airflow layer that are no Airflow component of their own.

    connect_sessions.py   one Spark Connect server session per transaction, shared by its Spark tasks
    metrics.py            the engine's metrics forwarded to Airflow's stats
    hosted.py             work run inside Airflow's own processes: off the host's thread, bounded, never raising

Importing this package imports nothing.
"""
