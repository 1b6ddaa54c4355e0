"""autosp.dialects: the `sp` dialect."""
from . import sp

__all__ = ["sp"]
