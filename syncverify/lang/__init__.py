"""Front end: `.sync` text -> Lark tree with positions -> resolved IR."""

from .load import load, load_many, read_source

__all__ = ["load", "load_many", "read_source"]
