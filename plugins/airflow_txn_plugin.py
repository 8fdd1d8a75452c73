"""Airflow-home shim for airflow_txn's plugin: copy this file into `$AIRFLOW_HOME/plugins/` (or the
folder `[core] plugins_folder` names) when the airflow_txn code is importable but not installed as a
package, so its `airflow.plugins` entry point does not exist (code vendored next to the DAGs, a
PYTHONPATH entry, a managed Airflow that only syncs folders).

When `pip install airflow-txn` registered the entry point, Airflow loads the plugin from there, and
this file defines nothing: a second `airflow_txn` plugin would be skipped with an import error
("already registered"). So keeping this file in a plugins folder is harmless either way.
"""

from __future__ import annotations

from importlib.metadata import entry_points

# The entry point's value, and the one installs made before the provider info declared the plugin carry;
# then both as installs made before the plugin moved to airflow_txn.airflow.plugins spell them.
ENTRY_POINTS = ("airflow_txn.airflow.plugins.plugin:plugin_by_entry_point",
                "airflow_txn.airflow.plugins.plugin:AirflowTxnPlugin",
                "airflow_txn.airflow.plugin:plugin_by_entry_point",
                "airflow_txn.airflow.plugin:AirflowTxnPlugin")


def registered_by_entry_point() -> bool:
    """True when an installed distribution already declares the plugin's entry point."""
    return any(ep.value in ENTRY_POINTS for ep in entry_points(group="airflow.plugins"))


if not registered_by_entry_point():
    from airflow_txn.airflow.plugins.plugin import AirflowTxnPlugin

    __all__ = ["AirflowTxnPlugin"]
