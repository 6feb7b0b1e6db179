"""Built-in memory backends, one module each; imported lazily by the registry."""
