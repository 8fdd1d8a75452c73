"""A session-wide Spark setting changed for the span of one step and put back after (set, or unset when the
session had none)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def temporary_setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """`key` = `value` in `spark`'s runtime settings while inside; the session's own value after."""
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)
