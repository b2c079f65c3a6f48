"""SQL statements that replication / CDC clients and MySQL drivers really send to a MySQL server when they
connect, check the server and start streaming its binlog, plus what operators type at a MySQL 8 and a set of
read-only expressions — a corpus for the endpoint's SQL layer.

``STATEMENTS`` is a list of ``(consumer, purpose, sql)`` tuples; a fourth field ``ERROR`` marks a statement
that a read-only binlog server is expected to refuse (a data read from a user table, FLUSH BINARY LOGS, KILL of
an unknown session, ...). Read locks are not refused: the endpoint takes them and pins the session's position and
schema to that moment (``dumper.server.snapshot``), which is what a connector's schema snapshot needs.
Consumer statements are copied from each client's public source (named in the group's comment) with its
placeholders filled in with plausible values: database ``bank``, tables ``accounts`` (id, name, balance) and
``audit_log``, binlog ``binlog.000001``, GTID source ``3e11fa47-71ca-11e1-9e33-c80aa9429562``. Whitespace,
case, trailing semicolons and comments are the clients' own. Within a group statements are roughly in the order
the client sends them, on one session: ``SHOW TABLE STATUS LIKE 'accounts';`` relies on the ``USE `bank`;`` just
before it, and Canal's two-statement ``show create table`` needs CLIENT_MULTI_STATEMENTS (Canal's own driver
sets it). Only statements that read or set session state are here: no DML, no DDL.
"""

from __future__ import annotations

ERROR = "error"  # fourth field: expected to fail on a read-only binlog server

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def _connector_j_connect(driver: str, revision: str, server_57: bool = False) -> str:
    """Connector/J's first query after the handshake (NativeSession.loadServerVariables): the driver's
    version comment glued to ``SELECT`` (two spaces after it), one ``@@var AS var`` per variable; a 5.7.20+
    server also gets the query-cache pair (left out from 8.0.3)."""
    names = ["character_set_client", "character_set_connection", "character_set_results", "character_set_server",
             "collation_server", "collation_connection", "init_connect", "interactive_timeout", "license",
             "lower_case_table_names", "max_allowed_packet", "net_write_timeout", "performance_schema"]
    if server_57:
        names += ["query_cache_size", "query_cache_type"]
    names += ["sql_mode", "system_time_zone", "time_zone", "transaction_isolation", "wait_timeout"]
    return (f"/* {driver} (Revision: {revision}) */SELECT  @@session.auto_increment_increment AS auto_increment_increment"
            + "".join(f", @@{n} AS {n}" for n in names))


STATEMENTS: list[tuple[str, ...]] = [
    # -- MySQL Connector/J (mysql/mysql-connector-j; 9.1.0, same text in 8.0.27, 8.0.33 and 8.4.0):
    # NativeSession.loadServerVariables (version comment = DatabaseMetaData.getDriverVersion, "<name>-<version>
    # (Revision: <git commit of the release tag>)"), NativeCharsetSettings.configure (SET NAMES /
    # character_set_results), ConnectionImpl (autocommit, sql_mode, isolation, read-only, maxRows),
    # NativeProtocol (time zone, SHOW WARNINGS), StatementImpl (streaming), DatabaseMetaData. Debezium 3.x
    # pins 9.1.0, Maxwell 8.4.0, Flink CDC's common module 8.0.27.
    ("connector-j", "connect: server variables, driver 9.1.0, MySQL 8.0.3+ server",
     _connector_j_connect("mysql-connector-j-9.1.0", "cf2917ea44ae2e43a4514a33771035aa99de73bf")),
    ("connector-j", "connect: server variables, driver 9.1.0, 5.7.20+ server (query cache variables too)",
     _connector_j_connect("mysql-connector-j-9.1.0", "cf2917ea44ae2e43a4514a33771035aa99de73bf", server_57=True)),
    ("connector-j", "connect: server variables, driver 8.4.0 (Maxwell's)",
     _connector_j_connect("mysql-connector-j-8.4.0", "1c3f5c149e0bfe31c7fbeb24e2d260cd890972c4")),
    ("connector-j", "connect: server variables, driver 8.0.33",
     _connector_j_connect("mysql-connector-j-8.0.33", "7d6b0800528b6b25c68b52dc10d6c1c8429c100c")),
    ("connector-j", "connect: server variables, driver 8.0.27 (still named mysql-connector-java)",
     _connector_j_connect("mysql-connector-java-8.0.27", "e920b979015ae7117d60d72bcc8f077a839cd791")),
    ("connector-j", "connect: session charset differs from characterEncoding=UTF-8", "SET NAMES utf8mb4"),
    ("connector-j", "connect: connectionCollation given", "SET NAMES utf8mb4 COLLATE utf8mb4_0900_ai_ci"),
    ("connector-j", "connect: no characterSetResults, server has one", "SET character_set_results = NULL"),
    ("connector-j", "connect: characterSetResults=UTF-8 (Debezium's and Flink CDC's URLs)",
     "SET character_set_results = utf8mb4"),
    ("connector-j", "connect: init_connect is set, read autocommit back", "SELECT @@session.autocommit"),
    ("connector-j", "connect: JDBC default autocommit", "SET autocommit=1"),
    ("connector-j", "setAutoCommit(false)", "SET autocommit=0"),
    ("connector-j", "connect: jdbcCompliantTruncation with an empty sql_mode", "SET sql_mode='STRICT_TRANS_TABLES'"),
    ("connector-j", "connect: forceConnectionTimeZoneToSession with connectionTimeZone=UTC",
     "SET SESSION time_zone='+00:00'"),
    ("connector-j", "getTransactionIsolation()", "SELECT @@session.transaction_isolation"),
    ("connector-j", "isReadOnly() on a 5.6.5+ server", "SELECT @@session.transaction_read_only"),
    ("connector-j", "setTransactionIsolation(REPEATABLE_READ)",
     "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
    ("connector-j", "setTransactionIsolation(READ_COMMITTED)",
     "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"),
    ("connector-j", "setReadOnly(true)", "SET SESSION TRANSACTION READ ONLY"),
    ("connector-j", "streaming result set (netTimeoutForStreamingResults default)", "SET net_write_timeout=600"),
    ("connector-j", "setMaxRows(0) after a limit", "SET sql_select_limit=DEFAULT"),
    ("connector-j", "getWarnings() after a statement with warnings", "SHOW WARNINGS"),
    ("connector-j", "commit()", "COMMIT"),
    ("connector-j", "rollback()", "ROLLBACK"),
    ("connector-j", "isServerLocal(): own thread id", "SELECT CONNECTION_ID()"),
    ("connector-j", "DatabaseMetaData.getTables(bank, null, \"%\", null)", "SHOW FULL TABLES FROM `bank` LIKE '%'"),
    ("connector-j", "DatabaseMetaData.getColumns(bank, null, accounts, null)",
     "SHOW FULL COLUMNS FROM `accounts` FROM `bank`"),
    ("connector-j", "DatabaseMetaData.getPrimaryKeys(bank, null, accounts)", "SHOW KEYS FROM `accounts` FROM `bank`"),

    # -- PyMySQL (PyMySQL/PyMySQL 1.1.x, connections.py Connection.connect / set_character_set / autocommit /
    # begin / commit / rollback / show_warnings). The SET NAMES is sent on every connect; SET AUTOCOMMIT only
    # when the wanted mode differs from the server's status flag (default autocommit=False -> "= 0").
    ("pymysql", "connect: default charset", "SET NAMES utf8mb4"),
    ("pymysql", "connect: charset and collation given", "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci"),
    ("pymysql", "connect: sql_mode given (cursor.execute with the value escaped)", "SET sql_mode='TRADITIONAL'"),
    ("pymysql", "connect: default autocommit=False on a server in autocommit", "SET AUTOCOMMIT = 0"),
    ("pymysql", "autocommit(True)", "SET AUTOCOMMIT = 1"),
    ("pymysql", "begin()", "BEGIN"),
    ("pymysql", "commit()", "COMMIT"),
    ("pymysql", "rollback()", "ROLLBACK"),
    ("pymysql", "show_warnings()", "SHOW WARNINGS"),

    # -- MySQL Connector/Python (mysql/mysql-connector-python 8.3.0 on GitHub, same text in the 9.x wheel):
    # abstracts.py MySQLConnectionAbstract._post_connection (set_charset_collation, autocommit, time_zone,
    # sql_mode), start_transaction, isolation/access mode; cursor.py _fetch_warnings.
    ("mysql-connector-python", "connect: default charset, MySQL 8 server",
     "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_0900_ai_ci'"),
    ("mysql-connector-python", "connect: default charset, 5.7 server", "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_general_ci'"),
    ("mysql-connector-python", "connect: default autocommit=False", "SET @@session.autocommit = OFF"),
    ("mysql-connector-python", "autocommit = True", "SET @@session.autocommit = ON"),
    ("mysql-connector-python", "autocommit property", "SELECT @@session.autocommit"),
    ("mysql-connector-python", "connect: time_zone given", "SET @@session.time_zone = '+00:00'"),
    ("mysql-connector-python", "time_zone property", "SELECT @@session.time_zone"),
    ("mysql-connector-python", "connect: sql_mode given", "SET @@session.sql_mode = 'TRADITIONAL'"),
    ("mysql-connector-python", "sql_mode property", "SELECT @@session.sql_mode"),
    ("mysql-connector-python", "start_transaction(isolation_level=...)",
     "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
    ("mysql-connector-python", "start_transaction(readonly=True)", "SET TRANSACTION READ ONLY"),
    ("mysql-connector-python", "start_transaction()", "START TRANSACTION"),
    ("mysql-connector-python", "commit()", "COMMIT"),
    ("mysql-connector-python", "rollback()", "ROLLBACK"),
    ("mysql-connector-python", "cursor with get_warnings=True", "SHOW WARNINGS"),

    # -- Go MySQL driver (go-sql-driver/mysql 1.10, connector.go Connect: getSystemVar, SET NAMES for a DSN
    # charset, handleParams for other DSN parameters; connection.go begin/BeginTx; transaction.go).
    ("go-sql-driver", "connect: no maxAllowedPacket in the DSN", "SELECT @@max_allowed_packet"),
    ("go-sql-driver", "connect: DSN charset=utf8mb4", "SET NAMES utf8mb4"),
    ("go-sql-driver", "connect: DSN charset=utf8mb4&collation=utf8mb4_unicode_ci",
     "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci"),
    ("go-sql-driver", "connect: DSN time_zone=%27%2B00%3A00%27", "SET time_zone = '+00:00'"),
    ("go-sql-driver", "connect: DSN sql_mode=%27TRADITIONAL%27", "SET sql_mode = 'TRADITIONAL'"),
    ("go-sql-driver", "BeginTx with an isolation level", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"),
    ("go-sql-driver", "Begin()", "START TRANSACTION"),
    ("go-sql-driver", "BeginTx(ReadOnly: true)", "START TRANSACTION READ ONLY"),
    ("go-sql-driver", "Tx.Commit()", "COMMIT"),
    ("go-sql-driver", "Tx.Rollback()", "ROLLBACK"),

    # -- go-mysql (go-mysql-org/go-mysql 1.16: replication/binlogsyncer.go BinlogSyncer.registerSlave /
    # enableSemiSync / MariaDB GTID start / killConnection, client/conn.go, canal/canal.go + canal/sync.go,
    # schema/schema.go). Note it asks the server for NO binlog checksum.
    ("go-mysql", "client: SetCharset", "SET NAMES utf8mb4"),
    ("go-mysql", "client: SetAutoCommit when the status flag says off", "SET AUTOCOMMIT = 1"),
    ("go-mysql", "syncer: checksum probe", "SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'"),
    ("go-mysql", "syncer: ask for events without checksum",
     "SET @master_binlog_checksum='NONE', @source_binlog_checksum='NONE'"),
    ("go-mysql", "syncer: HeartbeatPeriod=30s (nanoseconds)",
     "SET @master_heartbeat_period = 30000000000, @source_heartbeat_period = 30000000000"),
    ("go-mysql", "syncer: replica uuid (uuid.NewUUID)",
     "SET @slave_uuid = 'b5d7e6f2-5c3a-11ef-8f3e-0242ac120002', @replica_uuid = 'b5d7e6f2-5c3a-11ef-8f3e-0242ac120002'"),
    ("go-mysql", "syncer: semi-sync probe",
     "SHOW VARIABLES WHERE Variable_name IN ('rpl_semi_sync_master_enabled', 'rpl_semi_sync_source_enabled')"),
    ("go-mysql", "syncer: semi-sync on", "SET @rpl_semi_sync_slave = 1, @rpl_semi_sync_replica = 1;"),
    ("go-mysql", "syncer: MariaDB flavor", "SET @mariadb_slave_capability=4"),
    ("go-mysql", "syncer: MariaDB GTID start", "SET @slave_connect_state='0-1-100'"),
    ("go-mysql", "syncer: MariaDB GTID start", "SET @slave_gtid_strict_mode=1"),
    ("go-mysql", "syncer: reconnect kills its previous dump thread", "KILL 42", ERROR),
    ("go-mysql", "canal: row image check", "SHOW GLOBAL VARIABLES LIKE 'binlog_row_image'"),
    ("go-mysql", "canal: row format check", "SHOW GLOBAL VARIABLES LIKE 'binlog_format';"),
    ("go-mysql", "canal: GetMasterPos before 8.4", "SHOW MASTER STATUS"),
    ("go-mysql", "canal: GetMasterPos on 8.4+", "SHOW BINARY LOG STATUS"),
    ("go-mysql", "canal: GetMasterGTIDSet", "SELECT @@GLOBAL.GTID_EXECUTED"),
    ("go-mysql", "canal: FlushBinlog", "FLUSH BINARY LOGS", ERROR),
    ("go-mysql", "schema: IsTableExist",
     "SELECT * FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'bank' and TABLE_NAME = 'accounts' LIMIT 1"),
    ("go-mysql", "schema: table columns", "show full columns from `bank`.`accounts`"),
    ("go-mysql", "schema: table indexes", "show index from `bank`.`accounts`"),

    # -- python-mysql-replication (julien-duponchelle/python-mysql-replication; mysql-replication 1.0.17 from
    # PyPI: binlogstream.py BinLogStreamReader.__connect_to_stream / __checksum_enabled /
    # __show_binary_log_status / __set_mariadb_settings / __check_optional_meta_data, row_event.py
    # fetch_column_names; the 0.46.0 tag for the older SET form and __get_table_information). It connects with
    # PyMySQL, so the PyMySQL statements above come first.
    ("python-mysql-replication", "stream: checksum probe", "SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'"),
    ("python-mysql-replication", "stream: checksum on", "SET @master_binlog_checksum= @@global.binlog_checksum"),
    ("python-mysql-replication", "stream: slave_uuid given",
     "SET @slave_uuid = 'b5d7e6f2-5c3a-11ef-8f3e-0242ac120002', @replica_uuid = 'b5d7e6f2-5c3a-11ef-8f3e-0242ac120002'"),
    ("python-mysql-replication", "stream: slave_heartbeat=5 (nanoseconds)", "SET @master_heartbeat_period = 5000000000"),
    ("python-mysql-replication", "stream: slave_heartbeat=5, 0.46.0", "SET @master_heartbeat_period= 5000000000"),
    ("python-mysql-replication", "stream: always", "SET @mariadb_slave_capability=4"),
    ("python-mysql-replication", "stream: no log_file/log_pos given", "SHOW BINARY LOG STATUS"),
    ("python-mysql-replication", "stream: fallback on a parse error (and 0.46.0's only form)", "SHOW MASTER STATUS"),
    ("python-mysql-replication", "ctl: optional metadata check", "SHOW VARIABLES LIKE 'BINLOG_ROW_METADATA';"),
    ("python-mysql-replication", "ctl: column names (use_column_name_cache), 1.0.17",
     """
            SELECT COLUMN_NAME
            FROM INFORMATION_SCHEMA.COLUMNS
            WHERE TABLE_SCHEMA = 'bank' AND TABLE_NAME = 'accounts'
            ORDER BY ORDINAL_POSITION
        """),
    ("python-mysql-replication", "ctl: table information, 0.46.0", """
                    SELECT
                        COLUMN_NAME, COLLATION_NAME, CHARACTER_SET_NAME,
                        COLUMN_COMMENT, COLUMN_TYPE, COLUMN_KEY, ORDINAL_POSITION,
                        DATA_TYPE, CHARACTER_OCTET_LENGTH
                    FROM
                        information_schema.columns
                    WHERE
                        table_schema = 'bank' AND table_name = 'accounts'
                    """),
    ("python-mysql-replication", "stream: MariaDB auto_position", "SET @slave_connect_state = '0-1-100'"),
    ("python-mysql-replication", "stream: MariaDB", "SET @slave_gtid_strict_mode=1"),
    ("python-mysql-replication", "stream: MariaDB", "SET @slave_gtid_ignore_duplicates=0"),

    # -- mysql-binlog-connector-java (osheroff/mysql-binlog-connector-java, com.zendesk 0.31 used by Maxwell;
    # the debezium/mysql-binlog-connector-java fork 0.40.x used by Debezium 3.x and, via Debezium, Flink CDC):
    # BinaryLogClient.setupConnection / fetchBinlogFilenameAndPosition / fetchGtidPurged /
    # requestBinaryLogStreamMaria. Sent on the binlog connection, not through JDBC.
    ("mysql-binlog-connector-java", "setup: checksum probe", "show global variables like 'binlog_checksum'"),
    ("mysql-binlog-connector-java", "setup: checksum on", "set @master_binlog_checksum= @@global.binlog_checksum"),
    ("mysql-binlog-connector-java", "setup: master server id", "select @@server_id"),
    ("mysql-binlog-connector-java", "setup: Debezium (keep-alive 60 s x 0.8, in ns)",
     "set @master_heartbeat_period=48000000000"),
    ("mysql-binlog-connector-java", "setup: Maxwell (5 s, in ns)", "set @master_heartbeat_period=5000000000"),
    ("mysql-binlog-connector-java", "setup: Debezium binlog.net.write.timeout set", "set net_write_timeout=600"),
    ("mysql-binlog-connector-java", "setup: Debezium binlog.net.read.timeout set", "set net_read_timeout=600"),
    ("mysql-binlog-connector-java", "no position given, server before 8.4", "show master status"),
    ("mysql-binlog-connector-java", "no position given, server 8.4+", "show binary log status"),
    ("mysql-binlog-connector-java", "GTID mode, gtidSetFallbackToPurged", "show global variables like 'gtid_purged'"),
    ("mysql-binlog-connector-java", "MariaDB", "SET @mariadb_slave_capability=4"),
    ("mysql-binlog-connector-java", "MariaDB GTID", "SET @slave_connect_state = '0-1-100'"),
    ("mysql-binlog-connector-java", "MariaDB GTID", "SET @slave_gtid_strict_mode = 0"),
    ("mysql-binlog-connector-java", "MariaDB GTID", "SET @slave_gtid_ignore_duplicates = 0"),

    # -- Debezium MySQL connector (debezium/debezium 3.x main: debezium-connector-mysql MySqlConnection,
    # MySqlConnectorTask, snapshot/lock/*; debezium-connector-binlog BinlogConnector.validateConnection,
    # BinlogConnectorConnection, BinlogSnapshotChangeEventSource; legacy SnapshotReader of 1.5.0.Final for the
    # REGEXP form). JDBC through Connector/J 9.1.0: its statements above run first; prepared statements are
    # client-side, so GTID_SUBTRACT(?, ?) reaches the server with its literals.
    ("debezium", "connector validation", "SELECT version()"),
    ("debezium", "connection: autocommit off (initial operation)", "SET autocommit=0"),
    ("debezium", "connection: binary log status statement probe", "SHOW BINARY LOG STATUS"),
    ("debezium", "connection: probe failed, version fallback", "SELECT VERSION()"),
    ("debezium", "connection: before 8.4", "SHOW MASTER STATUS"),
    ("debezium", "GTID mode check", "SHOW GLOBAL VARIABLES LIKE 'GTID_MODE'"),
    ("debezium", "GTID: server set minus offset set",
     f"SELECT GTID_SUBTRACT('{UUID}:1-100', '{UUID}:1-90')"),
    ("debezium", "GTID: purged set", "SELECT @@global.gtid_purged"),
    ("debezium", "privilege check (LOCK TABLES, ...)", "SHOW GRANTS FOR CURRENT_USER"),
    ("debezium", "earliest/available binlog files", "SHOW BINARY LOGS"),
    ("debezium", "row format check", "SHOW GLOBAL VARIABLES LIKE 'binlog_format'"),
    ("debezium", "row image check", "SHOW GLOBAL VARIABLES LIKE 'binlog_row_image'"),
    ("debezium", "system variables (lower_case_table_names, ...)", "SHOW VARIABLES"),
    ("debezium", "charset variables before parsing DDL history",
     "SHOW VARIABLES WHERE Variable_name IN ('character_set_server','collation_server')"),
    ("debezium", "sql_mode before parsing DDL history", "SHOW VARIABLES WHERE Variable_name = 'sql_mode'"),
    ("debezium", "SSL check", "SHOW SESSION STATUS LIKE 'Ssl_version'"),
    ("debezium", "database collations",
     "SELECT schema_name, default_character_set_name, default_collation_name FROM information_schema.schemata"),
    ("debezium", "snapshot: databases", "SHOW DATABASES"),
    ("debezium", "snapshot: tables", "SHOW FULL TABLES IN `bank` where Table_Type = 'BASE TABLE'"),
    ("debezium", "snapshot: isolation (setTransactionIsolation)", "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
    ("debezium", "snapshot: lock timeout (10 s default)", "SET SESSION lock_wait_timeout=10"),
    ("debezium", "snapshot: InnoDB lock timeout", "SET SESSION innodb_lock_wait_timeout=10"),
    ("debezium", "snapshot: global read lock (default lock mode)", "FLUSH TABLES WITH READ LOCK"),
    ("debezium", "snapshot: Percona minimal lock mode", "LOCK TABLES FOR BACKUP"),
    ("debezium", "snapshot: table locks when the global lock failed",
     "FLUSH TABLES `bank`.`accounts`,`bank`.`audit_log` WITH READ LOCK"),
    ("debezium", "snapshot: isolation again after FLUSH", "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
    ("debezium", "snapshot: consistent snapshot", "START TRANSACTION WITH CONSISTENT SNAPSHOT"),
    ("debezium", "snapshot: lock heartbeat / reconnect check", "SELECT 1"),
    ("debezium", "snapshot: schema", "SHOW CREATE TABLE `bank`.`accounts`"),
    ("debezium", "snapshot: release locks", "UNLOCK TABLES"),
    ("debezium", "snapshot: row count estimate", "USE `bank`;"),
    ("debezium", "snapshot: row count estimate", "SHOW TABLE STATUS LIKE 'accounts';"),
    ("debezium", "snapshot: first select of a table", "SELECT * FROM `bank`.`accounts` LIMIT 1", ERROR),
    ("debezium", "snapshot: table data", "SELECT `id`, `name`, `balance` FROM `bank`.`accounts`", ERROR),
    ("debezium", "snapshot: end of the snapshot transaction", "COMMIT"),
    ("debezium", "legacy snapshot (1.5.0.Final SnapshotReader): server variables",
     "SHOW VARIABLES WHERE Variable_name REGEXP 'version|binlog|tx_|gtid|character_set|collation|time_zone'"),

    # -- Flink CDC MySQL source (apache/flink-cdc master: flink-connector-mysql-cdc MySqlValidator,
    # io.debezium.connector.mysql.MySqlConnection (its Debezium fork, probeShowBinaryLogStatement),
    # DebeziumUtils, TableDiscoveryUtils, StatementUtils (chunk splitting, prepared client-side),
    # MySqlSchema; pipeline connector MySqlSchemaUtils). Debezium's MySqlConnection statements (GTID,
    # grants, charset variables, snapshot) are shared and listed above.
    ("flink-cdc", "validate: version", "SELECT VERSION()"),
    ("flink-cdc", "validate: row format", "SHOW GLOBAL VARIABLES LIKE 'binlog_format'"),
    ("flink-cdc", "validate: row image", "SHOW GLOBAL VARIABLES LIKE 'binlog_row_image'"),
    ("flink-cdc", "validate: partial JSON updates off", "SHOW GLOBAL VARIABLES LIKE 'binlog_row_value_options'"),
    ("flink-cdc", "validate: server time zone (server-time-zone set)", "SELECT TIME_TO_SEC(TIMEDIFF(NOW(), UTC_TIMESTAMP()))"),
    ("flink-cdc", "connection: binary log status probe", "SHOW BINARY LOG STATUS"),
    ("flink-cdc", "connection: probe failed", "SHOW MASTER STATUS"),
    ("flink-cdc", "case sensitivity / system variables", "SHOW VARIABLES"),
    ("flink-cdc", "binlog offset check", "SHOW BINARY LOGS"),
    ("flink-cdc", "table discovery: databases", "SHOW DATABASES"),
    ("flink-cdc", "table discovery: tables", "SHOW FULL TABLES IN `bank` where Table_Type = 'BASE TABLE'"),
    ("flink-cdc", "pipeline: databases",
     "SHOW DATABASES WHERE `database` NOT IN ('information_schema', 'mysql', 'performance_schema', 'sys')"),
    ("flink-cdc", "schema of a captured table", "SHOW CREATE TABLE `bank`.`accounts`"),
    ("flink-cdc", "approximate row count", "USE `bank`;"),
    ("flink-cdc", "approximate row count", "SHOW TABLE STATUS LIKE 'accounts';"),
    ("flink-cdc", "GTID mode", "SHOW GLOBAL VARIABLES LIKE 'GTID_MODE'"),
    ("flink-cdc", "GTID purged", "SELECT @@global.gtid_purged"),
    ("flink-cdc", "chunk split: key range", "SELECT MIN(`id`), MAX(`id`) FROM `bank`.`accounts`", ERROR),
    ("flink-cdc", "chunk split: next chunk end (chunk size 8096)",
     "SELECT MAX(`id`) FROM (SELECT `id` FROM `bank`.`accounts` WHERE `id` >= 1 ORDER BY `id` ASC LIMIT 8096) AS T",
     ERROR),
    ("flink-cdc", "chunk split: next key", "SELECT MIN(`id`) FROM `bank`.`accounts` WHERE `id` > 8096", ERROR),
    ("flink-cdc", "snapshot split read: first chunk",
     "SELECT * FROM `bank`.`accounts` WHERE `id` <= 8097 AND NOT (`id` = 8097)", ERROR),

    # -- Canal (alibaba/canal 1.1.9-SNAPSHOT master: parse MysqlConnection.updateSettings / loadBinlogFormat /
    # loadBinlogImage / loadBinlogChecksum / loadVersionComment / queryServerId / sendMariaBinlogDumpGTID,
    # MysqlEventParser.findServerId / findEndPosition / findStartPosition, dbsync TableMetaCache, tsdb
    # DatabaseTableMeta; driver MysqlConnector.printSslStatus). Canal speaks the protocol itself (no JDBC).
    ("canal", "SSL connect: status", "SHOW STATUS LIKE 'Ssl_version'"),
    ("canal", "SSL connect: status", "SHOW STATUS LIKE 'Ssl_cipher'"),
    ("canal", "dump connection settings", "set wait_timeout=9999999"),
    ("canal", "dump connection settings", "set net_write_timeout=7200"),
    ("canal", "dump connection settings", "set net_read_timeout=7200"),
    ("canal", "dump connection settings", "set names 'binary'"),
    ("canal", "dump connection settings", "set @master_binlog_checksum= @@global.binlog_checksum"),
    ("canal", "dump connection settings", "set @slave_uuid=uuid()"),
    ("canal", "dump connection settings", "SET @mariadb_slave_capability='4'"),
    ("canal", "dump connection settings (15 s in ns)", "SET @master_heartbeat_period=15000000000"),
    ("canal", "binlog format", "show variables like 'binlog_format'"),
    ("canal", "binlog row image", "show variables like 'binlog_row_image'"),
    ("canal", "binlog checksum", "select @@global.binlog_checksum"),
    ("canal", "flavour (Percona?)", "select @@version_comment"),
    ("canal", "server id", "show variables like 'server_id'"),
    ("canal", "end position before 8.4", "show master status"),
    ("canal", "end position on 8.4+", "show binary log status"),
    ("canal", "start position", "show binlog events limit 1"),
    ("canal", "MariaDB GTID end position", "SELECT @@global.gtid_binlog_pos"),
    ("canal", "table meta cache: RDS?", r"show global variables  like 'rds\_%'"),
    ("canal", "table meta cache: PolarDB-X?", r"show global variables  like 'polarx\_%'"),
    ("canal", "table meta", "show create table `bank`.`accounts`"),
    ("canal", "table meta when SHOW CREATE TABLE failed", "desc `bank`.`accounts`"),
    ("canal", "tsdb snapshot: databases", "show databases"),
    ("canal", "tsdb snapshot: tables", "show full tables from `bank` where Table_type = 'BASE TABLE'"),
    ("canal", "tsdb snapshot: all tables of a schema in one multi-statement COM_QUERY",
     "show create table `bank`.`accounts`;show create table `bank`.`audit_log`;"),
    ("canal", "MariaDB GTID dump", "SET @slave_connect_state = '0-1-100'"),
    ("canal", "MariaDB GTID dump", "SET @slave_gtid_strict_mode = 0"),
    ("canal", "MariaDB GTID dump", "SET @slave_gtid_ignore_duplicates = 0"),

    # -- Maxwell (zendesk/maxwell 1.45: MaxwellMysqlStatus.ensureReplicationMysqlState / ensureGtidMysqlState
    # / getShowBinlogSQL / captureCaseSensitivity, MaxwellContext.getServerID, BinlogPosition.capture,
    # recovery Recovery, schema SchemaCapturer). JDBC through Connector/J 8.4.0 (client-side prepared
    # statements, so the ? arrive as literals); the binlog through mysql-binlog-connector-java.
    ("maxwell", "replication check: server id", "SHOW VARIABLES LIKE 'server_id'"),
    ("maxwell", "replication check", "SHOW VARIABLES LIKE 'log_bin'"),
    ("maxwell", "replication check", "SHOW VARIABLES LIKE 'binlog_format'"),
    ("maxwell", "replication check", "SHOW VARIABLES LIKE 'binlog_row_image'"),
    ("maxwell", "GTID mode check", "SHOW VARIABLES LIKE 'gtid_mode'"),
    ("maxwell", "GTID mode check", "SHOW VARIABLES LIKE 'log_slave_updates'"),
    ("maxwell", "GTID mode check", "SHOW VARIABLES LIKE 'enforce_gtid_consistency'"),
    ("maxwell", "server id", "SELECT @@server_id as server_id"),
    ("maxwell", "case sensitivity", "select @@lower_case_table_names"),
    ("maxwell", "binlog position, before 8.2", "SHOW MASTER STATUS"),
    ("maxwell", "binlog position, 8.2+", "SHOW BINARY LOG STATUS"),
    ("maxwell", "recovery: binlog files", "SHOW BINARY LOGS"),
    ("maxwell", "schema capture: databases",
     "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.SCHEMATA ORDER BY SCHEMA_NAME"),
    ("maxwell", "schema capture: databases, include_dbs=bank",
     "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.SCHEMATA WHERE SCHEMA_NAME IN ('bank') "
     "ORDER BY SCHEMA_NAME"),
    ("maxwell", "schema capture: tables and their charsets",
     "SELECT TABLES.TABLE_NAME, CCSA.CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.TABLES LEFT JOIN "
     "information_schema.COLLATION_CHARACTER_SET_APPLICABILITY AS CCSA ON TABLES.TABLE_COLLATION = CCSA.COLLATION_NAME "
     "WHERE TABLES.TABLE_SCHEMA = 'bank' "),
    ("maxwell", "schema capture: tables, include_tables=accounts",
     "SELECT TABLES.TABLE_NAME, CCSA.CHARACTER_SET_NAME FROM INFORMATION_SCHEMA.TABLES LEFT JOIN "
     "information_schema.COLLATION_CHARACTER_SET_APPLICABILITY AS CCSA ON TABLES.TABLE_COLLATION = CCSA.COLLATION_NAME "
     "WHERE TABLES.TABLE_SCHEMA = 'bank'  AND TABLES.TABLE_NAME IN ('accounts')"),
    ("maxwell", "schema capture: columns (5.6+ adds DATETIME_PRECISION)",
     "SELECT TABLE_NAME,COLUMN_NAME, DATA_TYPE, CHARACTER_SET_NAME, ORDINAL_POSITION, COLUMN_TYPE, DATETIME_PRECISION, "
     "COLUMN_KEY FROM `information_schema`.`COLUMNS` WHERE TABLE_SCHEMA = 'bank' ORDER BY TABLE_NAME, ORDINAL_POSITION"),
    ("maxwell", "schema capture: primary keys",
     "SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION FROM information_schema.KEY_COLUMN_USAGE WHERE CONSTRAINT_NAME = "
     "'PRIMARY' AND TABLE_SCHEMA = 'bank' ORDER BY TABLE_NAME, ORDINAL_POSITION"),
    ("maxwell", "schema capture: default charset", "select @@character_set_server"),

    # -- pg_chameleon (the4thdoctor/pg_chameleon 2.0.21, pg_chameleon/lib/mysql_lib.py mysql_source:
    # __check_mysql_config, connect_db_buffered/unbuffered, get_table_list, get_table_metadata,
    # get_foreign_keys_metadata, generate_select_statements, copy_data, lock_table, get_master_coordinates,
    # begin_tx/end_tx/make_tx_snapshot, insert_table_data, __create_indices, get_table_type_map). PyMySQL with
    # charset 'utf8' (config example); the streaming itself is python-mysql-replication. Parameters filled in
    # as PyMySQL does: schema %s -> 'bank', table %s -> 'accounts'; copy_max_memory "300M" -> 314572800;
    # generate_select_statements with no PostGIS (spatial types hexified) and charset utf8.
    ("pg_chameleon", "connect (PyMySQL charset='utf8')", "SET NAMES utf8"),
    ("pg_chameleon", "connect: every cursor", "SET SESSION   net_read_timeout = 600;"),
    ("pg_chameleon", "config check: Aurora? (an error is the expected answer)", "select AURORA_VERSION() ver;", ERROR),
    ("pg_chameleon", "config check, gtid_enable", "SHOW GLOBAL VARIABLES LIKE 'gtid_mode';"),
    ("pg_chameleon", "config check, GTID on: retrieved set", "SHOW SLAVE STATUS;"),
    ("pg_chameleon", "config check, GTID on, not a replica", "SHOW GLOBAL VARIABLES LIKE 'server_uuid';"),
    ("pg_chameleon", "config check", "SHOW GLOBAL VARIABLES LIKE 'log_bin';"),
    ("pg_chameleon", "config check", "SHOW GLOBAL VARIABLES LIKE 'binlog_format';"),
    ("pg_chameleon", "config check", "SHOW GLOBAL VARIABLES LIKE 'binlog_row_image';"),
    ("pg_chameleon", "get_table_list (schema 'bank')", """
            SELECT
                table_name as table_name
            FROM
                information_schema.TABLES
            WHERE
                    table_type='BASE TABLE'
                AND table_schema='bank'
            ;
        """),
    ("pg_chameleon", "get_table_metadata (schema 'bank', table 'accounts')", """
            SELECT
                column_name as column_name,
                column_default as column_default,
                ordinal_position as ordinal_position,
                data_type as data_type,
                column_type as column_type,
                character_maximum_length as character_maximum_length,
                extra as extra,
                column_key as column_key,
                is_nullable as is_nullable,
                numeric_precision as numeric_precision,
                numeric_scale as numeric_scale,
                CASE
                    WHEN data_type="enum"
                THEN
                    SUBSTRING(COLUMN_TYPE,5)
                END AS enum_list
            FROM
                information_schema.COLUMNS
            WHERE
                    table_schema='bank'
                AND\ttable_name='accounts'
            ORDER BY
                ordinal_position
            ;
        """),
    ("pg_chameleon", "get_foreign_keys_metadata (schema list 'bank')", """
            SELECT
                kc.table_name as table_name,
                kc.table_schema as table_schema,
                CASE WHEN (
                                SELECT
                                    count(1)
                                FROM
                                    information_schema.referential_constraints r
                                WHERE
                                        rc.constraint_name=r.constraint_name
                                    AND  rc.constraint_schema=r.constraint_schema
                            )>1
                THEN
                    concat(substring(kc.constraint_name,1,59),'_',SUBSTRING(md5(uuid()),1,4))
                ELSE
                    kc.constraint_name
                END as constraint_name,
                kc.referenced_table_name as referenced_table_name,
                kc.referenced_table_schema as referenced_table_schema,
                group_concat(DISTINCT concat('"',kc.column_name,'"') ORDER BY POSITION_IN_UNIQUE_CONSTRAINT) as fk_cols,
                group_concat(DISTINCT concat('"',kc.referenced_column_name,'"') ORDER BY POSITION_IN_UNIQUE_CONSTRAINT) as ref_columns,
                concat('ON DELETE ',rc.delete_rule) AS on_delete,
                concat('ON UPDATE ',rc.update_rule) AS on_update
            FROM
                information_schema.key_column_usage kc
                INNER JOIN information_schema.referential_constraints rc
                ON
                        rc.table_name=kc.table_name
                    AND rc.constraint_schema=kc.table_schema
                    AND rc.constraint_name=kc.constraint_name
            WHERE
                    kc.table_schema in ('bank')
                AND kc.referenced_table_name IS NOT NULL
                AND kc.referenced_table_schema in ('bank')
            GROUP BY
                kc.table_name,
                kc.constraint_name,
                kc.referenced_table_name,
                kc.table_schema,
                kc.referenced_table_schema,
                rc.delete_rule,
                rc.update_rule,
                rc.constraint_name,
                rc.constraint_schema
            ORDER BY
                kc.table_name
            ;

        """),
    ("pg_chameleon", "generate_select_statements (schema 'bank', table 'accounts')",
     """
            SELECT
                CASE
                    WHEN
                        data_type IN ('blob','tinyblob','mediumblob','longblob','binary','varbinary','point','geometry','linestring','polygon','multipoint','multilinestring','geometrycollection')
                    THEN
                        concat('hex(',column_name,')')
                    WHEN
                        data_type IN ('bit')
                    THEN
                        concat('cast(`',column_name,'` AS unsigned)')
                    WHEN
                        data_type IN ('datetime','timestamp','date')
                    THEN
                        concat('nullif(`',column_name,'`,cast("0000-00-00 00:00:00" as date))')
                    WHEN
                        data_type IN ('point','geometry','linestring','polygon','multipoint','multilinestring','geometrycollection')
                    THEN
                        concat('ST_AsText(',column_name,')')

                ELSE
                    concat('cast(`',column_name,'` AS char CHARACTER SET utf8)')
                END
                AS select_csv,
                CASE
                    WHEN
                        data_type IN ('blob','tinyblob','mediumblob','longblob','binary','varbinary','point','geometry','linestring','polygon','multipoint','multilinestring','geometrycollection')
                    THEN
                        concat('hex(',column_name,') AS','`',column_name,'`')
                    WHEN
                        data_type IN ('bit')
                    THEN
                        concat('cast(`',column_name,'` AS unsigned) AS','`',column_name,'`')
                    WHEN
                        data_type IN ('datetime','timestamp','date')
                    THEN
                        concat('nullif(`',column_name,'`,cast("0000-00-00 00:00:00" as date)) AS `',column_name,'`')
                    WHEN
                        data_type IN ('point','geometry','linestring','polygon','multipoint','multilinestring','geometrycollection')
                    THEN
                        concat('ST_AsText(',column_name,') AS','`',column_name,'`')

                ELSE
                    concat('cast(`',column_name,'` AS char CHARACTER SET utf8) AS','`',column_name,'`')

                END
                AS select_stat,
                column_name as column_name
            FROM
                information_schema.COLUMNS
            WHERE
                table_schema='bank'
                AND \ttable_name='accounts'
            ORDER BY
                ordinal_position
            ;
        """),
    ("pg_chameleon", "copy_data: row estimate (schema 'bank', table 'accounts', 300M)", """
            SELECT
                table_rows as table_rows,
                CASE
                    WHEN avg_row_length>0
                    then
                        round((314572800/avg_row_length))
                ELSE
                    0
                END as copy_limit,
                transactions
            FROM
                information_schema.TABLES,
                information_schema.ENGINES
            WHERE
                    table_schema='bank'
                AND\ttable_type='BASE TABLE'
                AND table_name='accounts'
                AND TABLES.engine = ENGINES.engine
            ;
        """),
    ("pg_chameleon", "__create_indices (schema 'bank', table 'accounts')", """

            SELECT
            CASE WHEN index_name='PRIMARY'
            THEN
                index_name
            WHEN (
                    SELECT
                        count(1)
                    FROM
                        information_schema.statistics s
                    WHERE
                             s.index_name=t.index_name
                        AND  s.table_schema=t.table_schema
                )>1
            THEN
                concat(substring(index_name,1,59),'_',SUBSTRING(md5(uuid()),1,4))
            ELSE
                index_name
            END AS index_name,
            non_unique as non_unique,
            GROUP_CONCAT(column_name ORDER BY seq_in_index) as index_columns
            FROM
                information_schema.statistics t
            WHERE
                    table_schema='bank'
                AND \ttable_name='accounts'
                AND\tindex_type = 'BTREE'
            GROUP BY
                table_name,
                non_unique,
                index_name
            HAVING SUM(sub_part IS NOT NULL) = 0
            ;
        """),
    ("pg_chameleon", "get_table_type_map: tables (schema 'bank')", """
                SELECT
                    t.table_schema as table_schema,
                    t.table_name as table_name,
                    SUBSTRING_INDEX(t.TABLE_COLLATION,'_',1) as character_set
                FROM
                    information_schema.TABLES t
                WHERE
                        table_type='BASE TABLE'
                    AND\ttable_schema='bank'
                ;
            """),
    ("pg_chameleon", "get_table_type_map: columns (schema 'bank', table 'accounts')",
     """
                    SELECT
                        column_name as column_name,
                        data_type as data_type
                    FROM
                        information_schema.COLUMNS
                    WHERE
                            table_schema='bank'
                        AND table_name='accounts'
                    ORDER BY
                        ordinal_position
                    ;
                """),
    ("pg_chameleon", "copy_data: lock_table", "FLUSH TABLES `bank`.`accounts` WITH READ LOCK;"),
    ("pg_chameleon", "copy_data: get_master_coordinates", "SHOW MASTER STATUS;"),
    ("pg_chameleon", "copy_data: begin_tx", "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
    ("pg_chameleon", "copy_data: begin_tx", "BEGIN"),
    ("pg_chameleon", "make_tx_snapshot", "SELECT * FROM `bank`.`accounts` LIMIT 1", ERROR),
    ("pg_chameleon", "copy_data: the CSV select of bank.accounts (id, name, balance)", """SELECT REPLACE(CONCAT('"',CONCAT_WS('","',COALESCE(REPLACE(cast(`id` AS char CHARACTER SET utf8), '"', '""'),'NULL') ,COALESCE(REPLACE(cast(`name` AS char CHARACTER SET utf8), '"', '""'),'NULL') ,COALESCE(REPLACE(cast(`balance` AS char CHARACTER SET utf8), '"', '""'),'NULL') ),'"'),'"NULL"','NULL') as data FROM `bank`.`accounts`;""", ERROR),
    ("pg_chameleon", "copy_data: unlock_tables", "UNLOCK TABLES;"),
    ("pg_chameleon", "insert_table_data: fallback slice", """SELECT cast(`id` AS char CHARACTER SET utf8),cast(`name` AS char CHARACTER SET utf8),cast(`balance` AS char CHARACTER SET utf8) FROM `bank`.`accounts` LIMIT 0, 1000000;""", ERROR),
    ("pg_chameleon", "copy_data: end_tx", "ROLLBACK"),

    # -- operators: what a DBA types at a MySQL 8 to look at a binlog source and its replicas.
    ("operators", "sessions", "SHOW PROCESSLIST"),
    ("operators", "sessions, full Info", "SHOW FULL PROCESSLIST"),
    ("operators", "sessions", "SELECT * FROM information_schema.PROCESSLIST"),
    ("operators", "dump threads",
     "SELECT ID, USER, HOST, DB, COMMAND, TIME, STATE, INFO FROM information_schema.PROCESSLIST "
     "WHERE COMMAND LIKE 'Binlog Dump%' ORDER BY TIME DESC"),
    ("operators", "sessions per user",
     "SELECT USER, COUNT(*) AS n FROM information_schema.PROCESSLIST GROUP BY USER ORDER BY n DESC"),
    ("operators", "replica state (8.0.22+)", "SHOW REPLICA STATUS"),
    ("operators", "replica state (old name)", "SHOW SLAVE STATUS"),
    ("operators", "connected replicas (8.0.22+)", "SHOW REPLICAS"),
    ("operators", "connected replicas (old name)", "SHOW SLAVE HOSTS"),
    ("operators", "after a statement", "SHOW WARNINGS"),
    ("operators", "after a statement", "SHOW ERRORS"),
    ("operators", "after a statement", "SHOW WARNINGS LIMIT 10"),
    ("operators", "after a statement", "SHOW COUNT(*) WARNINGS"),
    ("operators", "after a statement", "SELECT @@warning_count"),
    ("operators", "after a statement", "SELECT @@error_count"),
    ("operators", "status", "SHOW GLOBAL STATUS"),
    ("operators", "uptime", "SHOW GLOBAL STATUS LIKE 'Uptime'"),
    ("operators", "connections", "SHOW STATUS LIKE 'Threads_connected'"),
    ("operators", "status", "SHOW GLOBAL STATUS WHERE Variable_name IN ('Uptime', 'Threads_connected')"),
    ("operators", "binlog files", "SHOW BINARY LOGS"),
    ("operators", "binlog files (old name)", "SHOW MASTER LOGS"),
    ("operators", "binlog position", "SHOW MASTER STATUS"),
    ("operators", "binlog position (8.2+)", "SHOW BINARY LOG STATUS"),
    ("operators", "binlog events", "SHOW BINLOG EVENTS"),
    ("operators", "binlog events", "SHOW BINLOG EVENTS LIMIT 5"),
    ("operators", "binlog events of a file", "SHOW BINLOG EVENTS IN 'binlog.000001'"),
    ("operators", "binlog events from a position", "SHOW BINLOG EVENTS IN 'binlog.000001' FROM 4 LIMIT 10"),
    ("operators", "binlog events, offset and count", "SHOW BINLOG EVENTS IN 'binlog.000001' LIMIT 2, 3"),
    ("operators", "read-only?", "SELECT @@super_read_only, @@read_only"),
    ("operators", "binlog settings", "SELECT @@max_binlog_size"),
    ("operators", "binlog settings", "SELECT @@binlog_expire_logs_seconds"),
    ("operators", "binlog settings", "SELECT @@binlog_transaction_compression"),
    ("operators", "binlog settings", "SELECT @@binlog_row_value_options"),
    ("operators", "binlog settings", "SELECT @@log_bin, @@log_bin_basename, @@binlog_format, @@binlog_row_image, @@binlog_checksum"),
    ("operators", "GTID state", "SELECT @@global.gtid_executed, @@global.gtid_purged"),
    ("operators", "GTID state", "SELECT @@gtid_mode, @@enforce_gtid_consistency"),
    ("operators", "GTID arithmetic", f"SELECT GTID_SUBSET('{UUID}:1-5', @@global.gtid_executed)"),
    ("operators", "identity", "SELECT @@server_id, @@server_uuid"),
    ("operators", "identity", "SELECT @@version, @@version_comment, @@hostname, @@port"),
    ("operators", "who am I", "SELECT CURRENT_USER(), USER(), CONNECTION_ID()"),
    ("operators", "grants", "SHOW GRANTS"),
    ("operators", "variables", "SHOW VARIABLES LIKE 'binlog%'"),
    ("operators", "variables", "SHOW GLOBAL VARIABLES LIKE '%gtid%'"),
    ("operators", "variables",
     "SHOW VARIABLES WHERE Variable_name IN ('max_binlog_size', 'binlog_expire_logs_seconds')"),
    ("operators", "variables via performance_schema",
     "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM performance_schema.global_variables WHERE VARIABLE_NAME LIKE 'binlog%'"),
    ("operators", "status via performance_schema",
     "SELECT * FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Uptime'"),
    ("operators", "charsets", "SHOW CHARACTER SET LIKE 'utf8%'"),
    ("operators", "collations", "SHOW COLLATION WHERE Charset = 'utf8mb4' AND `Default` = 'Yes'"),
    ("operators", "engines", "SHOW ENGINES"),
    ("operators", "schema", "SHOW DATABASES"),
    ("operators", "schema", "SHOW TABLES FROM `bank`"),
    ("operators", "schema", "SHOW CREATE DATABASE `bank`"),
    ("operators", "schema", "SHOW TABLE STATUS FROM `bank`"),
    ("operators", "schema", "SHOW INDEX FROM `accounts` FROM `bank`"),
    ("operators", "schema", "DESCRIBE `bank`.`accounts`"),
    ("operators", "row count of a user table", "SELECT COUNT(*) FROM `bank`.`accounts`", ERROR),

    # -- expressions: read-only SELECTs over literals and information_schema (the bank schema).
    ("expressions", "arithmetic", "SELECT 1 + 2 * 3, (1 + 2) * 3, 10 / 4, 10 DIV 4, 10 % 3, -5 MOD 3, 7 - -2"),
    ("expressions", "comparisons", "SELECT 1 = 1, 1 <> 2, 1 != 2, 2 > 1, 2 >= 2, 1 < 2, 1 <= 1, NULL <=> NULL, NULL = NULL"),
    ("expressions", "string comparisons", "SELECT 'a' = 'A', 'abc' < 'abd', BINARY 'a' = 'A', STRCMP('a', 'b')"),
    ("expressions", "NULL and truth tests", "SELECT 1 IS NULL, NULL IS NULL, 0 IS NOT NULL, 1 IS TRUE, 0 IS FALSE, NULL IS UNKNOWN"),
    ("expressions", "logic", "SELECT 1 AND 0, 1 OR 0, NOT 1, 1 XOR 1, !0, 1 && 1, 0 || 1"),
    ("expressions", "bit operators", "SELECT 5 & 3, 5 | 3, 5 ^ 3, 1 << 4, 256 >> 2, ~0, BIT_COUNT(255)"),
    ("expressions", "literals", "SELECT 0x41, X'4142', b'1010' + 0, 1e3, .5, -0.0, TRUE, FALSE, NULL"),
    ("expressions", "string literals", "SELECT 'it''s', \"double\", 'a' 'b', _utf8mb4'x', N'y', 'tab\\there'"),
    ("expressions", "IN / BETWEEN",
     "SELECT 5 BETWEEN 1 AND 10, 5 NOT BETWEEN 6 AND 10, 3 IN (1, 2, 3), 'x' NOT IN ('a', 'b'), NULL IN (1, 2)"),
    ("expressions", "LIKE", r"SELECT 'binlog.000001' LIKE 'binlog.%', 'abc' LIKE 'a_c', 'a%c' LIKE 'a\%c', 'ABC' NOT LIKE 'x%'"),
    ("expressions", "REGEXP",
     r"SELECT 'mysql-bin.000042' REGEXP '^[a-z-]+\\.[0-9]{6}$', 'abc' RLIKE 'B', 'abc' NOT REGEXP '^z', "
     r"REGEXP_LIKE('Abc', '^a', 'c')"),
    ("expressions", "numeric functions",
     "SELECT GREATEST(3, 7, 5), LEAST(3, 7, 5), ABS(-4), CEIL(1.2), FLOOR(1.8), ROUND(2.567, 2), TRUNCATE(2.567, 1), "
     "POW(2, 10), SQRT(16), MOD(17, 5), SIGN(-3)"),
    ("expressions", "simple CASE", "SELECT CASE 2 WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE 'many' END"),
    ("expressions", "searched CASE", "SELECT CASE WHEN 5 > 3 THEN 'gt' WHEN 5 = 3 THEN 'eq' ELSE 'lt' END AS cmp"),
    ("expressions", "CASE without ELSE", "SELECT CASE WHEN 1 = 0 THEN 'never' END"),
    ("expressions", "IF / IFNULL / NULLIF / COALESCE",
     "SELECT IF(1 > 0, 'yes', 'no'), IFNULL(NULL, 'fallback'), IFNULL(0, 1), NULLIF(5, 5), NULLIF(5, 6), "
     "COALESCE(NULL, NULL, 'third')"),
    ("expressions", "CONCAT / CONCAT_WS", "SELECT CONCAT('bank', '.', 'accounts'), CONCAT_WS(',', 'a', NULL, 'c'), CONCAT('x', NULL)"),
    ("expressions", "SUBSTRING",
     "SELECT SUBSTRING('mysql-bin.000042', 11), SUBSTRING('abcdef', 2, 3), SUBSTRING('abcdef', -2), "
     "SUBSTR('abcdef' FROM 3 FOR 2), MID('abcdef', 4, 2)"),
    ("expressions", "SUBSTRING_INDEX",
     "SELECT SUBSTRING_INDEX('utf8mb4_0900_ai_ci', '_', 1), SUBSTRING_INDEX('a.b.c', '.', -2), "
     "SUBSTRING_INDEX(SUBSTRING_INDEX('a,b,c', ',', 2), ',', -1)"),
    ("expressions", "LEFT / RIGHT / UPPER / LOWER",
     "SELECT LEFT('binlog', 3), RIGHT('binlog.000001', 6), UPPER('abc'), LOWER('ABC'), UCASE('x'), LCASE('Y')"),
    ("expressions", "LENGTH / CHAR_LENGTH",
     "SELECT LENGTH('h\u00e9llo'), CHAR_LENGTH('h\u00e9llo'), CHARACTER_LENGTH('ab'), OCTET_LENGTH('ab'), BIT_LENGTH('a')"),
    ("expressions", "REPLACE / TRIM",
     "SELECT REPLACE('a-b-c', '-', '+'), TRIM('  x  '), LTRIM('  x'), RTRIM('x  '), TRIM(BOTH 'x' FROM 'xxaxx'), "
     "TRIM(LEADING '0' FROM '000123'), TRIM(TRAILING '.' FROM 'a..')"),
    ("expressions", "padding and repetition",
     "SELECT LPAD('7', 3, '0'), RPAD('ab', 5, '.'), LPAD('abcdef', 3, '0'), REPEAT('ab', 3), REVERSE('abc'), SPACE(3)"),
    ("expressions", "LOCATE / INSTR",
     "SELECT LOCATE('bin', 'mysql-bin.000001'), LOCATE('x', 'abc'), LOCATE('b', 'abcb', 3), INSTR('mysql-bin', 'bin'), "
     "POSITION('b' IN 'abc'), FIND_IN_SET('b', 'a,b,c'), FIELD('b', 'a', 'b')"),
    ("expressions", "more string functions",
     "SELECT ELT(2, 'a', 'b', 'c'), ASCII('A'), CHAR(65 USING utf8mb4), ORD('a'), FORMAT(1234567.891, 2), QUOTE('it''s'), "
     "INSERT('abcdef', 2, 3, 'XY')"),
    ("expressions", "hex and hashes", "SELECT HEX('abc'), UNHEX('616263'), HEX(255), MD5('abc'), SHA1('abc'), CRC32('abc')"),
    ("expressions", "current time", "SELECT NOW(), CURDATE(), CURTIME(), CURRENT_TIMESTAMP, CURRENT_DATE, UTC_TIMESTAMP(), NOW(6)"),
    ("expressions", "DATE_FORMAT of a literal",
     "SELECT DATE_FORMAT('2024-03-05 14:07:09', '%Y-%m-%d %H:%i:%s'), DATE_FORMAT('2024-03-05', '%W %M %e %Y'), "
     "DATE_FORMAT('2024-03-05 14:07:09', '%y%m%d %T %p')"),
    ("expressions", "DATE_ADD / DATE_SUB with INTERVAL",
     "SELECT DATE_ADD('2024-01-31', INTERVAL 1 MONTH), DATE_SUB('2024-03-01', INTERVAL 1 DAY), "
     "'2024-01-01 00:00:00' + INTERVAL 2 HOUR, DATE_ADD('2024-01-01 10:00:00', INTERVAL '1:30' HOUR_MINUTE), "
     "ADDDATE('2024-01-01', 10)"),
    ("expressions", "UNIX_TIMESTAMP / FROM_UNIXTIME",
     "SELECT UNIX_TIMESTAMP('2024-01-01 00:00:00'), FROM_UNIXTIME(1704067200), FROM_UNIXTIME(1704067200, '%Y-%m-%d'), "
     "UNIX_TIMESTAMP() > 0"),
    ("expressions", "date differences",
     "SELECT DATEDIFF('2024-03-01', '2024-02-01'), TIMESTAMPDIFF(SECOND, '2024-01-01 00:00:00', '2024-01-01 01:00:00'), "
     "TIMEDIFF('12:00:00', '11:30:00'), TIME_TO_SEC('01:00:00'), SEC_TO_TIME(3661)"),
    ("expressions", "date parts",
     "SELECT YEAR('2024-03-05'), MONTH('2024-03-05'), DAY('2024-03-05'), HOUR('14:07:09'), MINUTE('14:07:09'), "
     "SECOND('14:07:09'), DAYOFWEEK('2024-03-05'), DAYNAME('2024-03-05'), LAST_DAY('2024-02-10'), "
     "DATE('2024-03-05 14:07:09'), EXTRACT(YEAR_MONTH FROM '2024-03-05')"),
    ("expressions", "STR_TO_DATE", "SELECT STR_TO_DATE('05/03/2024', '%d/%m/%Y'), STR_TO_DATE('2024-03-05 14:07', '%Y-%m-%d %H:%i')"),
    ("expressions", "CAST",
     "SELECT CAST('42' AS UNSIGNED), CAST(-1 AS SIGNED), CAST('3.14' AS DECIMAL(5,2)), CAST(65 AS CHAR), "
     "CAST('2024-03-05' AS DATE), CAST('2024-03-05 14:07:09' AS DATETIME), CAST('12:30' AS TIME), CAST('x' AS BINARY)"),
    ("expressions", "CONVERT",
     "SELECT CONVERT('abc' USING utf8mb4), CONVERT('42', UNSIGNED INTEGER), CONVERT(3.7, SIGNED), "
     "CHARSET(CONVERT('x' USING latin1)), COLLATION('abc')"),
    ("expressions", "implicit conversion", "SELECT '10' + 5, '3 apples' + 0, 1 + '1e1', CONCAT(1, 2.5), 10 = '10'"),
    ("expressions", "information functions",
     "SELECT DATABASE(), SCHEMA(), USER(), CURRENT_USER, VERSION(), CONNECTION_ID(), LAST_INSERT_ID(), ROW_COUNT()"),
    ("expressions", "non-deterministic", "SELECT UUID() IS NOT NULL, LENGTH(UUID()), RAND() < 1, LENGTH(MD5(UUID()))"),
    ("expressions", "FROM DUAL", "SELECT 'a' AS x FROM DUAL WHERE 1 = 1"),
    ("expressions", "JSON", "SELECT JSON_OBJECT('a', 1), JSON_EXTRACT('{\"a\": [1, 2]}', '$.a[1]'), JSON_VALID('{}')"),
    ("expressions", "scalar subquery",
     "SELECT (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bank') AS n_tables"),
    ("expressions", "IN subquery",
     "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bank' AND TABLE_NAME IN "
     "(SELECT TABLE_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' AND COLUMN_NAME = 'amount')"),
    ("expressions", "EXISTS subquery",
     "SELECT t.TABLE_NAME FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = 'bank' AND EXISTS (SELECT 1 FROM "
     "information_schema.STATISTICS s WHERE s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME AND "
     "s.INDEX_NAME = 'PRIMARY') ORDER BY t.TABLE_NAME"),
    ("expressions", "derived table",
     "SELECT x.TABLE_NAME, x.n FROM (SELECT TABLE_NAME, COUNT(*) AS n FROM information_schema.COLUMNS WHERE "
     "TABLE_SCHEMA = 'bank' GROUP BY TABLE_NAME) AS x WHERE x.n > 2 ORDER BY x.n DESC"),
    ("expressions", "correlated subquery in the select list",
     "SELECT t.TABLE_NAME, (SELECT COUNT(*) FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA AND "
     "c.TABLE_NAME = t.TABLE_NAME) AS n FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = 'bank' ORDER BY n DESC, "
     "t.TABLE_NAME"),
    ("expressions", "scalar subquery in WHERE",
     "SELECT COUNT(*) FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = 'bank' AND c.TABLE_NAME = "
     "(SELECT MIN(TABLE_NAME) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bank')"),
    ("expressions", "CTE",
     "WITH cols AS (SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank') "
     "SELECT TABLE_NAME, COUNT(*) FROM cols GROUP BY TABLE_NAME ORDER BY TABLE_NAME"),
    ("expressions", "window function",
     "SELECT TABLE_NAME, COLUMN_NAME, ROW_NUMBER() OVER (PARTITION BY TABLE_NAME ORDER BY ORDINAL_POSITION) AS rn "
     "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank'"),
    ("expressions", "UNION ALL",
     "SELECT 'tables' AS kind, COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bank' UNION ALL "
     "SELECT 'columns', COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank'"),
    ("expressions", "UNION with ORDER BY and LIMIT",
     "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bank' UNION "
     "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' ORDER BY name LIMIT 5"),
    ("expressions", "JOIN TABLES / COLUMNS",
     "SELECT t.TABLE_NAME, t.ENGINE, c.COLUMN_NAME, c.COLUMN_TYPE FROM information_schema.TABLES t JOIN "
     "information_schema.COLUMNS c ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME WHERE "
     "t.TABLE_SCHEMA = 'bank' ORDER BY t.TABLE_NAME, c.ORDINAL_POSITION"),
    ("expressions", "JOIN KEY_COLUMN_USAGE / COLUMNS",
     "SELECT k.TABLE_NAME, k.COLUMN_NAME, c.DATA_TYPE FROM information_schema.KEY_COLUMN_USAGE k INNER JOIN "
     "information_schema.COLUMNS c ON c.TABLE_SCHEMA = k.TABLE_SCHEMA AND c.TABLE_NAME = k.TABLE_NAME AND "
     "c.COLUMN_NAME = k.COLUMN_NAME WHERE k.CONSTRAINT_NAME = 'PRIMARY' AND k.TABLE_SCHEMA = 'bank' "
     "ORDER BY k.TABLE_NAME, k.ORDINAL_POSITION"),
    ("expressions", "LEFT JOIN: tables without a primary key",
     "SELECT t.TABLE_NAME FROM information_schema.TABLES t LEFT JOIN information_schema.KEY_COLUMN_USAGE k ON "
     "k.TABLE_SCHEMA = t.TABLE_SCHEMA AND k.TABLE_NAME = t.TABLE_NAME AND k.CONSTRAINT_NAME = 'PRIMARY' WHERE "
     "t.TABLE_SCHEMA = 'bank' AND k.COLUMN_NAME IS NULL"),
    ("expressions", "three-way join TABLES / COLUMNS / STATISTICS",
     "SELECT t.TABLE_NAME, c.COLUMN_NAME, s.INDEX_NAME, s.SEQ_IN_INDEX FROM information_schema.TABLES t JOIN "
     "information_schema.COLUMNS c ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME LEFT JOIN "
     "information_schema.STATISTICS s ON s.TABLE_SCHEMA = c.TABLE_SCHEMA AND s.TABLE_NAME = c.TABLE_NAME AND "
     "s.COLUMN_NAME = c.COLUMN_NAME WHERE t.TABLE_SCHEMA = 'bank' ORDER BY t.TABLE_NAME, c.ORDINAL_POSITION"),
    ("expressions", "comma join with USING-like predicates",
     "SELECT t.TABLE_NAME, s.INDEX_NAME FROM information_schema.TABLES t, information_schema.STATISTICS s WHERE "
     "s.TABLE_SCHEMA = t.TABLE_SCHEMA AND s.TABLE_NAME = t.TABLE_NAME AND t.TABLE_SCHEMA = 'bank'"),
    ("expressions", "GROUP_CONCAT ORDER BY SEPARATOR",
     "SELECT TABLE_NAME, GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION SEPARATOR ', ') AS cols FROM "
     "information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' GROUP BY TABLE_NAME ORDER BY TABLE_NAME"),
    ("expressions", "GROUP_CONCAT DISTINCT DESC",
     "SELECT GROUP_CONCAT(DISTINCT DATA_TYPE ORDER BY DATA_TYPE DESC SEPARATOR '|') FROM information_schema.COLUMNS "
     "WHERE TABLE_SCHEMA = 'bank'"),
    ("expressions", "index columns per index",
     "SELECT s.TABLE_NAME, s.INDEX_NAME, s.NON_UNIQUE, GROUP_CONCAT(s.COLUMN_NAME ORDER BY s.SEQ_IN_INDEX) AS cols FROM "
     "information_schema.STATISTICS s WHERE s.TABLE_SCHEMA = 'bank' GROUP BY s.TABLE_NAME, s.INDEX_NAME, s.NON_UNIQUE "
     "ORDER BY s.TABLE_NAME, s.INDEX_NAME"),
    ("expressions", "aggregates with GROUP BY / HAVING / ORDER BY / LIMIT",
     "SELECT TABLE_NAME, COUNT(*) AS n_columns, MIN(ORDINAL_POSITION), MAX(ORDINAL_POSITION), "
     "SUM(CHARACTER_MAXIMUM_LENGTH IS NOT NULL) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' GROUP BY "
     "TABLE_NAME HAVING COUNT(*) >= 3 ORDER BY n_columns DESC, TABLE_NAME LIMIT 10"),
    ("expressions", "GROUP BY / ORDER BY position",
     "SELECT DATA_TYPE, COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' GROUP BY DATA_TYPE "
     "ORDER BY 2 DESC, 1"),
    ("expressions", "GROUP BY an alias of a CASE",
     "SELECT CASE WHEN DATA_TYPE IN ('bigint', 'int') THEN 'integer' WHEN DATA_TYPE LIKE '%char' THEN 'string' "
     "ELSE DATA_TYPE END AS kind, COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' GROUP BY kind "
     "ORDER BY kind"),
    ("expressions", "aggregates over strings",
     "SELECT MAX(LENGTH(COLUMN_NAME)), MIN(CHAR_LENGTH(TABLE_NAME)), SUM(ORDINAL_POSITION), AVG(ORDINAL_POSITION), "
     "COUNT(DISTINCT TABLE_NAME) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank'"),
    ("expressions", "aggregate with no rows", "SELECT COUNT(*), MAX(TABLE_NAME), SUM(TABLE_ROWS) FROM information_schema.TABLES WHERE 1 = 0"),
    ("expressions", "IF over an aggregate",
     "SELECT IF(COUNT(*) > 0, 'has pk', 'no pk') FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = 'bank' "
     "AND TABLE_NAME = 'accounts' AND CONSTRAINT_NAME = 'PRIMARY'"),
    ("expressions", "IFNULL / COALESCE over columns",
     "SELECT COLUMN_NAME, IFNULL(CHARACTER_SET_NAME, '-'), COALESCE(COLUMN_DEFAULT, 'NULL') FROM "
     "information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' AND TABLE_NAME = 'accounts' ORDER BY ORDINAL_POSITION"),
    ("expressions", "string functions over columns",
     "SELECT UPPER(TABLE_NAME), LENGTH(TABLE_NAME), CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) AS fq, "
     "SUBSTRING_INDEX(TABLE_COLLATION, '_', 1) AS charset FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bank' "
     "ORDER BY fq"),
    ("expressions", "LIKE / ORDER BY / LIMIT OFFSET",
     "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' AND TABLE_NAME = 'accounts' AND "
     "COLUMN_NAME LIKE 'b%' ORDER BY ORDINAL_POSITION LIMIT 1 OFFSET 0"),
    ("expressions", "REGEXP over columns",
     "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' AND "
     "COLUMN_TYPE REGEXP '^(big)?int' ORDER BY TABLE_NAME, ORDINAL_POSITION LIMIT 5"),
    ("expressions", "BETWEEN over columns",
     "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'bank' AND ORDINAL_POSITION "
     "BETWEEN 2 AND 3 ORDER BY TABLE_NAME, ORDINAL_POSITION"),
    ("expressions", "NOT IN over schemata",
     "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN ('information_schema', 'mysql', "
     "'performance_schema', 'sys') ORDER BY SCHEMA_NAME"),
    ("expressions", "DISTINCT", "SELECT DISTINCT TABLE_SCHEMA FROM information_schema.COLUMNS ORDER BY TABLE_SCHEMA"),
    ("expressions", "LIMIT offset, count",
     "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bank' ORDER BY TABLE_NAME DESC LIMIT 1, 1"),
    ("expressions", "CAST in ORDER BY and WHERE",
     "SELECT COLUMN_NAME, CAST(ORDINAL_POSITION AS CHAR) AS pos FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
     "'bank' AND CAST(ORDINAL_POSITION AS SIGNED) > 1 ORDER BY CAST(ORDINAL_POSITION AS CHAR), COLUMN_NAME"),
    ("expressions", "backquoted identifiers and aliases",
     "SELECT `c`.`COLUMN_NAME` AS `name`, `c`.`DATA_TYPE` `type` FROM `information_schema`.`COLUMNS` AS `c` WHERE "
     "`c`.`TABLE_SCHEMA` = 'bank' ORDER BY `name`"),
    ("expressions", "lower-case information_schema names",
     "select table_name, column_name from information_schema.columns where table_schema = 'bank' order by 1, 2"),
]

EXPECTED_ERRORS: frozenset[str] = frozenset(s[2] for s in STATEMENTS if len(s) > 3 and s[3] == ERROR)
