"""The storage root: where part files live, how they are written, read, listed and removed."""
