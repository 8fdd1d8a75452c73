"""Test helpers that start real services (never mocks): `tests.harness.zookeeper`,
`tests.harness.postgres` (a private cluster that tests may crash and restart) and
`tests.harness.seaweedfs` (an S3-compatible object store)."""
