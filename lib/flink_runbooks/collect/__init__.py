"""Collect: list the inputs, read them with Spark, keep the lines that matter, save incidents."""
