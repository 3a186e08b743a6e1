"""Render: the diagnosis as JSON, text and Markdown; config diffs, FlinkDeployment and Kafka patches."""
