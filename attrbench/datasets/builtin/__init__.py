"""Built-in dataset plugins, one module each; the registry imports them (``attrbench.registry``)."""
