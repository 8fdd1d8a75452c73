"""What the engine tells operators while it runs: structured logs (each line names its tid and CSN) and
metrics (a process-wide sink, a no-op until one is installed)."""
