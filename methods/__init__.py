"""Built-in method plugins, one module each; the registry imports them (``attrbench.registry``).

A new method is one more file here that registers itself: ``register(MyMethod)``, importing only from
:mod:`attrbench.plugin`.
"""
