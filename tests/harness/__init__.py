"""Test helpers that start real services (never mocks): `tests.harness.zookeeper` and
`tests.harness.postgres` (a private cluster that tests may crash and restart)."""
