"""Data: the example type and dataset base class, readers of the shipped files and of users' files,
the agreement (SVA) reading shared by every model kind, sampling, and the bundled data (``data/``).

Dataset plugins live in ``builtin/`` (one file each) or come from the entry-point group
``attrbench.datasets``; they import only from :mod:`attrbench.plugin`.
"""
