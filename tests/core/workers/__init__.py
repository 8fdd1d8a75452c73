"""Worker programs the multi-process and crash tests start as separate OS processes."""
