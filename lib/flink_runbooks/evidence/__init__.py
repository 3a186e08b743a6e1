"""Evidence: shared readings of an incident (checkpoint history, job runs, episodes, memory, Kafka, RocksDB)."""
