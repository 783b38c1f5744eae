"""Built-in dataset plugins: importing this package registers each (one module per dataset)."""
from . import sst2, sva_generated, sva_linzen  # noqa: F401
