"""Global binlog output (docs/architecture.md; the file layout: docs/formats.md).

* ``dumper.global_binlog``: ``GlobalBinlog(dir).append(txn)`` writes ``binlog.NNNNNN`` +
  ``binlog.index`` (BEGIN / hint+CTS / TABLE_MAP / rows / XID / CTS marker, DDL, heartbeats,
  rotation at transaction boundaries); ``encode_txn`` / ``render_file`` / ``file_start`` /
  ``rotate_event`` for engines that render files themselves.
* ``dumper.recovery``: what ``GlobalBinlog`` does on open — cut after the last CTS marker, repair a
  torn start or an unfinished rotation.
* ``dumper.state``: ``state.json`` (restart points, last vtso, cluster identity), atomic.
* ``dumper.cluster``: DN identity and the one-cluster rule. ``dumper.verify``: ``gbinlog verify``.
* ``dumper.server``: the replication endpoint, ``serve(dir, cfg)``.
"""
