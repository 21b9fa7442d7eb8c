"""Storage: one ``Store`` protocol and its implementations."""
