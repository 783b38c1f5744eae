"""Built-in evaluation plugins, one module each; the registry imports them (``attrbench.registry``).

A new evaluation is one more file here that registers itself, importing only from :mod:`attrbench.plugin`.
"""
