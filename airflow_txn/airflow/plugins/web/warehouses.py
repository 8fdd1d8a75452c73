"""The page's warehouses: one open Warehouse per connection configuration per API-server process,
opened on the first request that needs it and kept (opening costs a catalog engine and a
read of the catalog's versions; a request should cost neither). Opening creates nothing: the
page of a warehouse nobody created answers 404 "no warehouse at ..." until a writer creates it."""

from __future__ import annotations

import logging
import threading

from airflow_txn.core.config import WarehouseConfig
from airflow_txn.core.warehouse import Warehouse

log = logging.getLogger(__name__)


class Warehouses:
    """Open warehouses by configuration; `get` opens a configuration's warehouse once."""

    def __init__(self) -> None:
        self._open: dict[WarehouseConfig, Warehouse] = {}
        self._lock = threading.Lock()

    def get(self, config: WarehouseConfig) -> Warehouse:
        with self._lock:
            wh = self._open.get(config)
            if wh is None:
                wh = Warehouse.open(catalog=config.catalog_url, root=config.root, oracle=config.oracle,
                                    storage_options=dict(config.storage_options),
                                    connect_timeout=config.connect_timeout)
                log.info("airflow_txn page: opened %r (kept for this process)", wh)
                self._open[config] = wh
            return wh
