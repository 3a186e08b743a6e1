"""Parse: log layouts, multi-line records, the effective configuration, keys, units and redaction."""
