"""The truth's value codec lives in ``binlog.json_values`` (shared with ``dumper.verify``)."""

from binlog.json_values import decode_value, encode_value

__all__ = ["decode_value", "encode_value"]
