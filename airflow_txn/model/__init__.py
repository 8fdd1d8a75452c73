"""The values every layer speaks in, with their checks: transaction ids, CSNs, names, partition values
and table schemas. Pure code: nothing here touches the catalog, storage or the oracle."""
