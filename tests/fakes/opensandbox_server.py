#!/usr/bin/env python3
"""Fake OpenSandbox server (lifecycle API + execd) for pisb tests.

THIS IS NOT A SANDBOX.  Commands sent to the fake execd run on the machine
that runs this script, as the user that runs this script.  The only
"isolation" is a per-sandbox scratch directory that is used as the sandbox's
filesystem root (sandbox path /workspace/x maps to <state>/<id>/fs/workspace/x).
When bubblewrap (bwrap) works on the host, commands additionally get a mount
namespace whose "/" is that scratch directory (host /usr, /etc, ... are bound
read-only), so absolute paths in commands agree with the file API.  Even then
there is no network, PID, user or resource isolation.  Never point it at
untrusted input and never listen on anything other than 127.0.0.1.

Wire behaviour follows shared/reference/opensandbox.md (sections 1, 2 and 5)
and the OpenAPI specs sandbox-lifecycle.yml / execd-api.yaml.  See
tests/fakes/README.md for what is and is not implemented.

Standard library only.  Usage:

    python3 tests/fakes/opensandbox_server.py --port 0 --api-key KEY \
        [--port-file F] [--state-dir D]

The bound port is printed on stdout (one line, just the number) and written
to --port-file if given.
"""

import argparse
import datetime as _dt
import fnmatch
import grp
import json
import os
import posixpath
import pwd
import queue
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

EXECD_PORT = 44772
HOST_RO_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
FAKE_VERSION = "1"
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

# --------------------------------------------------------------------------
# time helpers
# --------------------------------------------------------------------------


# GET /_fake/log keeps the last this many requests.
REQLOG_MAX = 20000


def now_us():
    return time.time_ns() // 1000


def now_ms():
    return time.time_ns() // 1_000_000


def fmt_lifecycle_time(us):
    """pydantic v2 style: 2026-06-15T10:00:00.123456Z (fraction only if non-zero)."""
    d = EPOCH + _dt.timedelta(microseconds=us)
    s = d.strftime("%Y-%m-%dT%H:%M:%S")
    if d.microsecond:
        s += ".%06d" % d.microsecond
    return s + "Z"


def fmt_go_time(ns):
    """Go time.Time JSON (RFC3339Nano, trailing zeros trimmed), UTC."""
    sec, frac = divmod(ns, 1_000_000_000)
    d = EPOCH + _dt.timedelta(seconds=sec)
    s = d.strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        s += "." + ("%09d" % frac).rstrip("0")
    return s + "Z"


_DT_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?"
    r"(Z|z|[+-]\d{2}(?::?\d{2})?)?$"
)


def parse_datetime_us(value):
    """Parse like pydantic v2 (lax): RFC 3339 / ISO 8601 strings with Z,
    +HH:MM or no offset (treated as UTC by the server), any number of
    fractional digits (truncated to microseconds), or unix seconds/ms numbers.
    Returns microseconds since the epoch or raises ValueError(reason)."""
    if isinstance(value, bool) or value is None:
        raise ValueError("input is not a datetime")
    if isinstance(value, (int, float)):
        v = float(value)
        if abs(v) > 2e10:  # pydantic: large numbers are milliseconds
            v = v / 1000.0
        return int(round(v * 1_000_000))
    if not isinstance(value, str):
        raise ValueError("input is not a datetime")
    m = _DT_RE.match(value.strip())
    if not m:
        if re.match(r"^-?\d+(\.\d+)?$", value.strip()):
            return parse_datetime_us(float(value.strip()))
        raise ValueError("invalid datetime format")
    y, mo, d, hh, mi, ss, frac, tz = m.groups()
    try:
        base = _dt.datetime(int(y), int(mo), int(d), int(hh or 0), int(mi or 0),
                            int(ss or 0), int((frac or "0")[:6].ljust(6, "0")),
                            tzinfo=_dt.timezone.utc)
    except ValueError as e:
        raise ValueError(str(e))
    offset = 0
    if tz and tz not in ("Z", "z"):
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        oh = int(digits[:2])
        om = int(digits[2:4] or 0)
        if oh > 23 or om > 59:
            raise ValueError("invalid timezone offset")
        offset = sign * (oh * 3600 + om * 60)
    delta = base - EPOCH
    return (delta.days * 86400 + delta.seconds - offset) * 1_000_000 + delta.microseconds


# --------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------


def py_json(obj):
    """FastAPI JSONResponse rendering: compact, UTF-8."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def go_json(obj):
    """Go encoding/json rendering: compact, HTML-escaped (<, >, & as \\u00XX)."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    s = (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
         .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return s.encode("utf-8")


def err_body(code, message):
    return {"code": code, "message": message}


def detail_item(typ, loc, msg, inp, ctx=None):
    d = {"type": typ, "loc": loc, "msg": msg, "input": inp}
    if ctx:
        d["ctx"] = ctx
    return d


class HttpError(Exception):
    """Raised by handlers; rendered by the dispatcher."""

    def __init__(self, status, body, go=False, headers=None, content_type=None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.go = go
        self.headers = headers or {}
        self.content_type = content_type


def lc_error(status, code, message):
    return HttpError(status, err_body(code, message))


def lc_422(items):
    return HttpError(422, {"detail": items})


def ex_error(status, code, message):
    return HttpError(status, err_body(code, message), go=True)


# --------------------------------------------------------------------------
# metadata label validation (server services/validators.py semantics)
# --------------------------------------------------------------------------

_LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
RESERVED_PREFIX = "opensandbox.io/"


def _valid_label_key(key):
    if "/" in key:
        prefix, name = key.split("/", 1)
        if not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix):
            return False
    else:
        name = key
    return 0 < len(name) <= 63 and bool(_LABEL_NAME_RE.match(name))


def _valid_label_value(value):
    return len(value) <= 63 and (value == "" or bool(_LABEL_NAME_RE.match(value)))


def validate_metadata(md, reserved_code):
    for key, value in md.items():
        if key.startswith(RESERVED_PREFIX):
            raise lc_error(400, reserved_code,
                           "Metadata key '%s' uses the reserved prefix '%s'. Keys under this prefix "
                           "are managed by the system and cannot be set via metadata." % (key, RESERVED_PREFIX))
        if not isinstance(key, str) or not isinstance(value, str):
            raise lc_error(400, "SANDBOX::INVALID_METADATA_LABEL", "Metadata keys and values must be strings.")
        if not _valid_label_key(key):
            raise lc_error(400, "SANDBOX::INVALID_METADATA_LABEL",
                           "Metadata key '%s' is invalid: must be either a name or a DNS-subdomain prefix and "
                           "name separated by /, where the name is up to 63 characters and matches "
                           "[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, and the optional prefix is a valid DNS "
                           "subdomain up to 253 characters." % key)
        if not _valid_label_value(value):
            raise lc_error(400, "SANDBOX::INVALID_METADATA_LABEL",
                           "Metadata value '%s' is invalid: must be 63 characters or less, start/end with an "
                           "alphanumeric character, and contain only alphanumeric, '-', '_', or '.' "
                           "characters." % value)


# --------------------------------------------------------------------------
# stdout/stderr line splitting (execd semantics)
# --------------------------------------------------------------------------


class LineSplitter:
    """One event per line; \\r, \\n and \\r\\n all terminate a line; the
    terminator is stripped; an empty line is reported as "\\n"; a final
    partial line is flushed at EOF."""

    def __init__(self):
        self.buf = bytearray()
        self.skip_lf = False

    @staticmethod
    def _text(raw):
        if not raw:
            return "\n"
        return bytes(raw).decode("utf-8", errors="replace")

    def feed(self, data):
        out = []
        for b in data:
            if self.skip_lf:
                self.skip_lf = False
                if b == 0x0A:
                    continue
            if b == 0x0A or b == 0x0D:
                out.append(self._text(self.buf))
                self.buf = bytearray()
                if b == 0x0D:
                    self.skip_lf = True
            else:
                self.buf.append(b)
        return out

    def flush(self):
        if self.buf:
            t = self._text(self.buf)
            self.buf = bytearray()
            return [t]
        return []


# --------------------------------------------------------------------------
# model objects
# --------------------------------------------------------------------------

STATE_REASONS = {
    # reason codes/messages are the fake's own except Running (docker_service).
    "Pending": ("CONTAINER_STARTING", "Sandbox container is starting."),
    "Running": ("CONTAINER_RUNNING", "Sandbox container started successfully."),
    "Pausing": ("SANDBOX_PAUSING", "Sandbox is pausing."),
    "Paused": ("CONTAINER_PAUSED", "Sandbox container is paused."),
    "Resuming": ("SANDBOX_RESUMING", "Sandbox is resuming."),
}


class Command:
    def __init__(self, cid, content, background):
        self.id = cid
        self.content = content
        self.background = background
        self.proc = None
        self.started_ns = time.time_ns()
        self.finished_ns = None
        self.exit_code = None
        self.error = ""
        self.done = threading.Event()
        self.log_path = None
        self.timed_out = False

    def pgid(self):
        return self.proc.pid if self.proc else None

    def signal_group(self, sig):
        if self.proc is None or self.done.is_set():
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class Spawner:
    """Start every child from one long-lived thread.  bwrap --die-with-parent
    uses PR_SET_PDEATHSIG, which fires when the *thread* that forked the child
    exits; request threads are short-lived (a background command would be
    killed as soon as its HTTP connection closed)."""

    def __init__(self):
        self.q = queue.Queue()
        threading.Thread(target=self._loop, name="spawner", daemon=True).start()

    def _loop(self):
        while True:
            args, kwargs, box, ev = self.q.get()
            try:
                box.append(subprocess.Popen(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed back to the caller
                box.append(e)
            ev.set()

    def popen(self, *args, **kwargs):
        box, ev = [], threading.Event()
        self.q.put((args, kwargs, box, ev))
        ev.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]


class Sandbox:
    def __init__(self, sid, base_dir):
        self.id = sid
        self.base_dir = base_dir
        self.root = os.path.join(base_dir, "fs")
        self.execd_dir = os.path.join(base_dir, "execd")
        self.image = None
        self.snapshot_id = None
        self.platform = None
        self.entrypoint = None
        self.metadata = None
        self.env = {}
        self.created_us = now_us()
        self.expires_us = None
        self.state = "Pending"
        self.last_transition_us = self.created_us
        self.pending = None  # (target_state, at_us)
        self.token = secrets.token_hex(16)
        self.commands = {}
        self.gone = False
        self.create_request = None  # the create body as received (admin view only)


# --------------------------------------------------------------------------
# the fake
# --------------------------------------------------------------------------

DEFAULT_SETTINGS = {
    "latency_ms": 0,            # added to every non-admin request
    "delay_ms": {},             # op -> extra delay
    "fail": {},                 # op -> {"status":503,"count":N,"body":..., "headers":{...}}
    "pending_ms": 200,          # Pending -> Running after create
    "pausing_ms": 200,          # Pausing -> Paused after pause
    "resuming_ms": 200,         # Resuming -> Running after resume
    "stream_grace_ms": 1000,    # execd keeps SSE open this long after the terminal event
    "ping_interval_ms": 3000,   # execd ping events while a command runs
    "execd_token": False,       # endpoint returns X-EXECD-ACCESS-TOKEN header, execd enforces it
    "paused_execd": "error",    # "error" (502) or "hang" (wait until Running) while not Running
    "paused_hang_ms": 30000,
    "min_timeout": 60,          # create: timeout below this is 422 (server: 60)
    "max_timeout": None,        # create: timeout above this is 400 (server config)
    "command_path": None,       # PATH of commands (sandbox paths, ':'-separated): what the image has;
                                # None = the host's PATH
    "corrupt_uploads": 0,       # the next N uploaded files get one byte flipped (a damaged transfer)
    "renew_after_current": False,  # renew: refuse (400) an expiresAt not after the current one, as the
                                   # spec says ("must be in the future and after the current expiresAt")
}

SETTING_TYPES = {
    "latency_ms": int, "pending_ms": int, "pausing_ms": int, "resuming_ms": int,
    "stream_grace_ms": int, "ping_interval_ms": int, "paused_hang_ms": int,
    "min_timeout": int, "execd_token": bool, "corrupt_uploads": int,
    "renew_after_current": bool,
}


class Fake:
    def __init__(self, args):
        self.api_key = args.api_key
        self.lock = threading.RLock()
        self.sandboxes = {}
        self.verbose = args.verbose
        self.keep_files = args.keep_files
        self.own_state_dir = args.state_dir is None
        self.state_dir = os.path.abspath(args.state_dir or tempfile.mkdtemp(prefix="opensandbox-fake-"))
        os.makedirs(self.state_dir, exist_ok=True)
        self.startup_settings = json.loads(json.dumps(DEFAULT_SETTINGS))
        for k in ("pending_ms", "pausing_ms", "resuming_ms", "stream_grace_ms", "ping_interval_ms",
                  "min_timeout", "max_timeout", "latency_ms"):
            v = getattr(args, k, None)
            if v is not None:
                self.startup_settings[k] = v
        if args.execd_token:
            self.startup_settings["execd_token"] = True
        if args.paused_execd:
            self.startup_settings["paused_execd"] = args.paused_execd
        self.settings = json.loads(json.dumps(self.startup_settings))
        self.stats_lock = threading.Lock()
        self.reset_stats()
        self.port = None
        self.host = "127.0.0.1"
        self.shell = shutil.which("bash") or "/bin/sh"
        self.bwrap_shell = "/bin/bash" if os.path.exists("/usr/bin/bash") or os.path.exists("/bin/bash") else "/bin/sh"
        self.exec_mode = self._pick_exec_mode(args.exec_mode)
        self.stopping = threading.Event()
        self.spawner = Spawner()

    # ---- exec mode -------------------------------------------------------

    def _bwrap_argv(self, root, cwd):
        # absolute: a command's PATH (command_path) need not hold bwrap
        argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--bind", root, "/"]
        for d in HOST_RO_DIRS:
            if os.path.islink(d):
                if not os.path.lexists(os.path.join(root, d[1:])):
                    argv += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                argv += ["--ro-bind", d, d]
        argv += ["--proc", "/proc", "--dev", "/dev", "--chdir", cwd]
        return argv

    def _pick_exec_mode(self, wanted):
        if wanted == "plain":
            return "plain"
        ok = False
        if shutil.which("bwrap") and os.path.exists("/bin/sh"):
            probe = tempfile.mkdtemp(prefix="probe-", dir=self.state_dir)
            try:
                r = subprocess.run(self._bwrap_argv(probe, "/") + ["/bin/sh", "-c", "exit 7"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
                ok = r.returncode == 7
            except (OSError, subprocess.SubprocessError):
                ok = False
            finally:
                shutil.rmtree(probe, ignore_errors=True)
        if wanted == "bwrap" and not ok:
            raise SystemExit("opensandbox fake: --exec-mode bwrap requested but bwrap does not work here")
        return "bwrap" if ok else "plain"

    # ---- stats -----------------------------------------------------------

    def reset_stats(self):
        with self.stats_lock:
            self.stats = {"total": 0, "by_route": {}, "by_op": {}, "by_path": {}, "by_status": {},
                          "inflight": 0, "inflight_max": 0}
            self.reqlog = []

    def log_request(self, op, method, path, status, start, end):
        """One entry of GET /_fake/log: when each request started and ended."""
        with self.stats_lock:
            if len(self.reqlog) >= REQLOG_MAX:
                del self.reqlog[: REQLOG_MAX // 10]
            self.reqlog.append({"op": op, "method": method, "path": path, "status": status,
                                "start_ms": round(start * 1000.0, 3), "end_ms": round(end * 1000.0, 3)})

    def count_request(self, op, route, path):
        with self.stats_lock:
            s = self.stats
            s["total"] += 1
            s["by_route"][route] = s["by_route"].get(route, 0) + 1
            s["by_op"][op] = s["by_op"].get(op, 0) + 1
            s["by_path"][path] = s["by_path"].get(path, 0) + 1

    def count_status(self, op, status):
        key = "%s %s" % (op, status)
        with self.stats_lock:
            self.stats["by_status"][key] = self.stats["by_status"].get(key, 0) + 1

    def inflight(self, delta):
        with self.stats_lock:
            self.stats["inflight"] += delta
            if self.stats["inflight"] > self.stats["inflight_max"]:
                self.stats["inflight_max"] = self.stats["inflight"]

    # ---- faults ----------------------------------------------------------

    def take_fault(self, op):
        """Return a fail rule to apply to this request (and consume one count)."""
        with self.lock:
            rule = self.settings["fail"].get(op)
            if not rule:
                return None
            count = rule.get("count", 1)
            if count == 0:
                return None
            if count > 0:
                rule["count"] = count - 1
            return dict(rule)

    def apply_settings(self, doc):
        if not isinstance(doc, dict):
            raise ValueError("body must be a JSON object")
        known = set(DEFAULT_SETTINGS) | {"expire_now"}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise ValueError("unknown keys %s; valid keys: %s" % (unknown, sorted(known)))
        with self.lock:
            for k, v in doc.items():
                if k == "expire_now":
                    continue
                if k in SETTING_TYPES:
                    t = SETTING_TYPES[k]
                    if t is bool:
                        if not isinstance(v, bool):
                            raise ValueError("%s must be a boolean" % k)
                    elif not isinstance(v, int) or isinstance(v, bool) or v < 0:
                        raise ValueError("%s must be a non-negative integer" % k)
                    self.settings[k] = v
                elif k == "max_timeout":
                    if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                        raise ValueError("max_timeout must be an integer or null")
                    self.settings[k] = v
                elif k == "command_path":
                    if v is not None and (not isinstance(v, str) or not v):
                        raise ValueError("command_path must be a non-empty string or null")
                    self.settings[k] = v
                elif k == "paused_execd":
                    if v not in ("error", "hang"):
                        raise ValueError("paused_execd must be 'error' or 'hang'")
                    self.settings[k] = v
                elif k == "delay_ms":
                    if not isinstance(v, dict) or not all(isinstance(x, int) and x >= 0 for x in v.values()):
                        raise ValueError("delay_ms must map op names to non-negative integers")
                    for op, ms in v.items():
                        if ms == 0:
                            self.settings["delay_ms"].pop(op, None)
                        else:
                            self.settings["delay_ms"][op] = ms
                elif k == "fail":
                    if not isinstance(v, dict):
                        raise ValueError("fail must map op names to rules")
                    for op, rule in v.items():
                        if rule is None:
                            self.settings["fail"].pop(op, None)
                            continue
                        if not isinstance(rule, dict):
                            raise ValueError("fail rule for %s must be an object or null" % op)
                        r = {"status": int(rule.get("status", 503)), "count": int(rule.get("count", 1))}
                        if "body" in rule:
                            r["body"] = rule["body"]
                        if "headers" in rule:
                            r["headers"] = dict(rule["headers"])
                        if "delay_ms" in rule:
                            r["delay_ms"] = int(rule["delay_ms"])
                        self.settings["fail"][op] = r
            ids = doc.get("expire_now")
            if ids is not None:
                if ids == "all":
                    ids = list(self.sandboxes)
                elif isinstance(ids, str):
                    ids = [ids]
                for sid in ids:
                    sbx = self.sandboxes.get(sid)
                    if sbx is not None:
                        sbx.expires_us = now_us()
                        self.remove_sandbox(sbx, "expired")

    # ---- sandbox state ---------------------------------------------------

    def _advance(self, sbx, at_us):
        """Apply a due asynchronous state transition.  Caller holds lock."""
        if sbx.pending and at_us >= sbx.pending[1]:
            target, when = sbx.pending
            prev = sbx.state
            sbx.state = target
            sbx.last_transition_us = when
            sbx.pending = None
            if prev == "Pausing" and target == "Paused":
                for c in list(sbx.commands.values()):
                    c.signal_group(signal.SIGSTOP)
            if prev == "Resuming" and target == "Running":
                for c in list(sbx.commands.values()):
                    c.signal_group(signal.SIGCONT)

    def set_state(self, sbx, state, then=None, after_ms=0):
        t = now_us()
        sbx.state = state
        sbx.last_transition_us = t
        sbx.pending = None
        if then is not None:
            if after_ms <= 0:
                sbx.pending = (then, t)
                self._advance(sbx, t)
            else:
                sbx.pending = (then, t + after_ms * 1000)

    def lookup(self, sid):
        """Return the live sandbox or None (expired ones are removed)."""
        with self.lock:
            sbx = self.sandboxes.get(sid)
            if sbx is None:
                return None
            t = now_us()
            if sbx.expires_us is not None and t >= sbx.expires_us:
                self.remove_sandbox(sbx, "expired")
                return None
            self._advance(sbx, t)
            return sbx

    def remove_sandbox(self, sbx, why):
        with self.lock:
            if self.sandboxes.get(sbx.id) is sbx:
                del self.sandboxes[sbx.id]
            sbx.gone = True
            cmds = list(sbx.commands.values())
        for c in cmds:
            c.signal_group(signal.SIGKILL)
            c.signal_group(signal.SIGCONT)
        if self.verbose:
            sys.stderr.write("fake: sandbox %s removed (%s)\n" % (sbx.id, why))
        if not self.keep_files:
            threading.Thread(target=self._rm_later, args=(sbx,), daemon=True).start()

    def _rm_later(self, sbx):
        deadline = time.time() + 5
        for c in list(sbx.commands.values()):
            c.done.wait(max(0.0, deadline - time.time()))
        shutil.rmtree(sbx.base_dir, ignore_errors=True)

    def reaper(self):
        while not self.stopping.wait(0.1):
            t = now_us()
            with self.lock:
                for sbx in list(self.sandboxes.values()):
                    if sbx.expires_us is not None and t >= sbx.expires_us:
                        self.remove_sandbox(sbx, "expired")
                    else:
                        self._advance(sbx, t)

    def shutdown_all(self):
        self.stopping.set()
        with self.lock:
            sbxs = list(self.sandboxes.values())
        for sbx in sbxs:
            with self.lock:
                if self.sandboxes.get(sbx.id) is sbx:
                    del self.sandboxes[sbx.id]
                sbx.gone = True
            for c in list(sbx.commands.values()):
                c.signal_group(signal.SIGKILL)
                c.signal_group(signal.SIGCONT)
        if self.own_state_dir and not self.keep_files:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    # ---- representation --------------------------------------------------

    def status_obj(self, sbx):
        reason, message = STATE_REASONS.get(sbx.state, (None, None))
        st = {"state": sbx.state}
        if reason:
            st["reason"] = reason
            st["message"] = message
        st["lastTransitionAt"] = fmt_lifecycle_time(sbx.last_transition_us)
        return st

    def sandbox_obj(self, sbx):
        d = {"id": sbx.id}
        if sbx.image is not None:
            d["image"] = {"uri": sbx.image["uri"]}
        if sbx.snapshot_id is not None:
            d["snapshotId"] = sbx.snapshot_id
        if sbx.platform is not None:
            d["platform"] = sbx.platform
        d["status"] = self.status_obj(sbx)
        if sbx.metadata is not None:
            d["metadata"] = dict(sbx.metadata)
        d["entrypoint"] = list(sbx.entrypoint)
        if sbx.expires_us is not None:
            d["expiresAt"] = fmt_lifecycle_time(sbx.expires_us)
        d["createdAt"] = fmt_lifecycle_time(sbx.created_us)
        return d

    def endpoint_for(self, sbx, port):
        return "%s:%d/sandboxes/%s/proxy/%d" % (self.host, self.port, sbx.id, port)


# --------------------------------------------------------------------------
# HTTP layer
# --------------------------------------------------------------------------

_AUTH_EXEMPT = re.compile(r"^(/health|/docs|/redoc|/openapi\.json)")
_PROXY_RE = re.compile(r"^(/v1)?/sandboxes/([^/]+)/proxy/(\d+)(/.*)?$")

LIFECYCLE_ROUTES = [
    # (method, regex, op, template)
    ("GET", r"/health", "health", "/health"),
    ("POST", r"/sandboxes", "create", "/sandboxes"),
    ("GET", r"/sandboxes", "list", "/sandboxes"),
    ("GET", r"/sandboxes/([^/]+)", "get", "/sandboxes/{id}"),
    ("DELETE", r"/sandboxes/([^/]+)", "delete", "/sandboxes/{id}"),
    ("PATCH", r"/sandboxes/([^/]+)/metadata", "patch", "/sandboxes/{id}/metadata"),
    ("POST", r"/sandboxes/([^/]+)/pause", "pause", "/sandboxes/{id}/pause"),
    ("POST", r"/sandboxes/([^/]+)/resume", "resume", "/sandboxes/{id}/resume"),
    ("POST", r"/sandboxes/([^/]+)/renew-expiration", "renew", "/sandboxes/{id}/renew-expiration"),
    ("GET", r"/sandboxes/([^/]+)/endpoints/([^/]+)", "endpoint", "/sandboxes/{id}/endpoints/{port}"),
    ("POST", r"/sandboxes/([^/]+)/snapshots", "snapshot", "/sandboxes/{id}/snapshots"),
    ("GET", r"/snapshots", "snapshot", "/snapshots"),
    ("GET", r"/snapshots/([^/]+)", "snapshot", "/snapshots/{id}"),
    ("DELETE", r"/snapshots/([^/]+)", "snapshot", "/snapshots/{id}"),
    ("POST", r"/metrics/events", "metrics_event", "/metrics/events"),
]
LIFECYCLE_ROUTES = [(m, re.compile("^" + rx + "$"), op, tpl) for (m, rx, op, tpl) in LIFECYCLE_ROUTES]

EXECD_ROUTES = [
    ("GET", r"/ping", "ping"),
    ("POST", r"/command", "command"),
    ("DELETE", r"/command", "interrupt"),
    ("GET", r"/command/status/([^/]+)", "command_status"),
    ("GET", r"/command/([^/]+)/logs", "command_logs"),
    ("GET", r"/files/info", "files_info"),
    ("DELETE", r"/files", "files_delete"),
    ("POST", r"/files/permissions", "files_permissions"),
    ("POST", r"/files/mv", "files_mv"),
    ("GET", r"/files/search", "files_search"),
    ("POST", r"/files/replace", "files_replace"),
    ("POST", r"/files/upload", "upload"),
    ("GET", r"/files/download", "download"),
    ("GET", r"/directories/list", "dirs_list"),
    ("POST", r"/directories", "dirs_make"),
    ("DELETE", r"/directories", "dirs_delete"),
]
EXECD_ROUTES = [(m, re.compile("^" + rx + "$"), op) for (m, rx, op) in EXECD_ROUTES]


class AbortConnection(Exception):
    """Drop the TCP connection without finishing the response."""


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 2048
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, BrokenPipeError, socket.timeout)):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "opensandbox-fake/" + FAKE_VERSION
    sys_version = ""
    timeout = 600  # idle keep-alive connections are dropped after this many seconds

    # ---- plumbing --------------------------------------------------------

    def version_string(self):
        return self.server_version

    def log_message(self, fmt, *args):
        if self.server.fake.verbose:
            sys.stderr.write("fake: %s %s\n" % (self.address_string(), fmt % args))

    def send_response(self, code, message=None):
        self._status = code
        super().send_response(code, message)

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_HEAD(self):
        self.dispatch("HEAD")

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            parts = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise AbortConnection()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        t = self.rfile.readline(65537)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline(3)
            return b"".join(parts)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def _common_headers(self):
        self.send_header("X-Request-ID", self.req_id)

    def send_body(self, status, data, content_type=None, headers=None):
        self.send_response(status)
        self._common_headers()
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if status == 204 or status == 304:
            self.end_headers()
            return
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD" and data:
            self.wfile.write(data)

    def send_lc_json(self, status, obj, headers=None):
        self.send_body(status, py_json(obj), "application/json", headers)

    def send_go_json(self, status, obj, headers=None):
        self.send_body(status, go_json(obj), "application/json; charset=utf-8", headers)

    def send_http_error(self, e):
        if e.content_type is not None:
            data = e.body if isinstance(e.body, bytes) else str(e.body).encode()
            self.send_body(e.status, data, e.content_type, e.headers)
        elif e.go:
            self.send_go_json(e.status, e.body, e.headers)
        else:
            self.send_lc_json(e.status, e.body, e.headers)

    def start_stream(self, status, content_type, headers=None):
        self.send_response(status)
        self._common_headers()
        self.send_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def write_chunk(self, data):
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")

    def abort(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- dispatcher ------------------------------------------------------

    def dispatch(self, method):
        fake = self.server.fake
        self.req_id = self.headers.get("X-Request-ID") or uuid.uuid4().hex
        self._status = None
        try:
            self.body = self.read_body()
        except (AbortConnection, ValueError):
            self.abort()
            return
        u = urlsplit(self.path)
        path = u.path
        self.query = parse_qs(u.query, keep_blank_values=True)
        self.raw_query = u.query
        if path == "/_fake" or path.startswith("/_fake/"):
            try:
                self.admin(method, path)
            except (BrokenPipeError, ConnectionError):
                self.close_connection = True
            return

        op, route, handler, params = self.route(method, path)
        fake.count_request(op, route, path)
        fake.inflight(+1)
        started = time.time()
        try:
            lat = fake.settings["latency_ms"]
            if lat:
                time.sleep(lat / 1000.0)
            if handler != "execd_proxy" and not _AUTH_EXEMPT.match(path) and fake.api_key:
                key = self.headers.get("OPEN-SANDBOX-API-KEY")
                if not key:
                    raise lc_error(401, "MISSING_API_KEY",
                                   "Authentication credentials are missing. Provide API key via "
                                   "OPEN-SANDBOX-API-KEY header.")
                if key != fake.api_key:
                    raise lc_error(401, "INVALID_API_KEY",
                                   "Authentication credentials are invalid. Check your API key and try again.")
            if handler is None:
                if params == "405":
                    raise HttpError(405, {"detail": "Method Not Allowed"})
                raise HttpError(404, {"detail": "Not Found"})
            d = fake.settings["delay_ms"].get(op)
            if d:
                time.sleep(d / 1000.0)
            rule = fake.take_fault(op)
            if rule is not None:
                self.apply_fault(op, rule)
                return
            getattr(self, "h_" + handler)(*params)
        except HttpError as e:
            self.send_http_error(e)
        except AbortConnection:
            self.abort()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - report as a server error
            traceback.print_exc()
            if self._status is None:
                try:
                    self.send_lc_json(500, err_body("GENERAL::UNKNOWN_ERROR", "fake internal error: %r" % (e,)))
                except OSError:
                    pass
            else:
                self.abort()
        finally:
            fake.inflight(-1)
            fake.count_status(op, self._status if self._status is not None else "aborted")
            fake.log_request(op, method, path, self._status if self._status is not None else "aborted",
                             started, time.time())

    def apply_fault(self, op, rule):
        if rule.get("delay_ms"):
            time.sleep(rule["delay_ms"] / 1000.0)
        status = rule.get("status", 503)
        if status == 0:
            raise AbortConnection()
        body = rule.get("body")
        headers = rule.get("headers") or {}
        if body is None:
            self.send_lc_json(status, err_body("FAKE::INJECTED_FAULT", "Injected fault for operation '%s'." % op),
                              headers)
        elif isinstance(body, str):
            self.send_body(status, body.encode(), "text/plain; charset=utf-8", headers)
        else:
            self.send_lc_json(status, body, headers)

    def route(self, method, path):
        m = _PROXY_RE.match(path)
        if m:
            prefix, sid, port, rest = m.group(1) or "", unquote(m.group(2)), int(m.group(3)), m.group(4) or "/"
            op = "execd"
            sub = rest
            if port == EXECD_PORT:
                for (rm, rx, eop) in EXECD_ROUTES:
                    if rm == method and rx.match(rest):
                        op = "execd_" + eop
                        sub = rx.pattern[1:-1].replace("([^/]+)", "{id}")
                        break
            tpl = "%s %s/sandboxes/{id}/proxy/%d%s" % (method, prefix, port, sub)
            return op, tpl, "execd_proxy", (sid, port, rest)
        prefix = ""
        p = path
        if p == "/v1" or p.startswith("/v1/"):
            prefix, p = "/v1", p[3:] or "/"
        path_matched = False
        for (rm, rx, op, tpl) in LIFECYCLE_ROUTES:
            mm = rx.match(p)
            if mm:
                path_matched = True
                if rm == method:
                    return op, "%s %s%s" % (method, prefix, tpl), op, tuple(unquote(g) for g in mm.groups())
        return ("unknown", "%s %s" % (method, path), None, "405" if path_matched else "404")

    # ---- admin -----------------------------------------------------------

    def admin(self, method, path):
        fake = self.server.fake
        if path == "/_fake/info" and method == "GET":
            return self.send_lc_json(200, {"port": fake.port, "host": fake.host, "api_key_required": bool(fake.api_key),
                                           "exec_mode": fake.exec_mode, "state_dir": fake.state_dir,
                                           "version": FAKE_VERSION, "pid": os.getpid()})
        if path == "/_fake/stats":
            if method == "GET":
                with fake.stats_lock:
                    s = json.loads(json.dumps(fake.stats))
                with fake.lock:
                    s["sandboxes"] = len(fake.sandboxes)
                return self.send_lc_json(200, s)
            if method == "DELETE":
                fake.reset_stats()
                return self.send_lc_json(200, {"ok": True})
        if path == "/_fake/log":
            if method == "GET":
                with fake.stats_lock:
                    log = list(fake.reqlog)
                return self.send_lc_json(200, log)
            if method == "DELETE":
                with fake.stats_lock:
                    fake.reqlog = []
                return self.send_lc_json(200, {"ok": True})
        if path == "/_fake/faults":
            if method == "GET":
                with fake.lock:
                    return self.send_lc_json(200, fake.settings)
            if method == "POST":
                try:
                    doc = json.loads(self.body or b"{}")
                    fake.apply_settings(doc)
                except (ValueError, TypeError) as e:
                    return self.send_lc_json(400, {"error": str(e)})
                with fake.lock:
                    return self.send_lc_json(200, fake.settings)
            if method == "DELETE":
                with fake.lock:
                    fake.settings = json.loads(json.dumps(fake.startup_settings))
                    return self.send_lc_json(200, fake.settings)
        if path == "/_fake/sandboxes" and method == "GET":
            with fake.lock:
                items = [self._admin_sbx(s) for s in fake.sandboxes.values()]
            return self.send_lc_json(200, items)
        m = re.match(r"^/_fake/sandboxes/([^/]+)(/expire)?$", path)
        if m:
            sbx = fake.lookup(unquote(m.group(1)))
            if sbx is None:
                return self.send_lc_json(404, {"error": "no such sandbox"})
            if m.group(2) and method == "POST":
                fake.apply_settings({"expire_now": sbx.id})
                return self.send_lc_json(200, {"ok": True})
            if not m.group(2) and method == "GET":
                with fake.lock:
                    return self.send_lc_json(200, self._admin_sbx(sbx))
        return self.send_lc_json(404, {"error": "unknown admin endpoint %s %s" % (method, path)})

    def _admin_sbx(self, sbx):
        return {"id": sbx.id, "state": sbx.state, "root": sbx.root, "request": sbx.create_request,
                "expiresAt": fmt_lifecycle_time(sbx.expires_us) if sbx.expires_us else None,
                "commands": {c.id: {"running": not c.done.is_set(), "background": c.background,
                                    "exit_code": c.exit_code, "pid": c.pgid()}
                             for c in sbx.commands.values()}}

    # ---- lifecycle helpers ---------------------------------------------------

    def json_body(self):
        if not self.body:
            raise lc_422([detail_item("missing", ["body"], "Field required", None)])
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as e:
            raise lc_422([detail_item("json_invalid", ["body", 0], "JSON decode error", {},
                                      {"error": str(e)})])

    def need_sandbox(self, sid):
        sbx = self.server.fake.lookup(sid)
        if sbx is None:
            raise lc_error(404, "DOCKER::SANDBOX_NOT_FOUND", "Sandbox %s not found." % sid)
        return sbx

    # ---- lifecycle handlers ----------------------------------------------

    def h_health(self):
        self.send_lc_json(200, {"status": "healthy"})

    def h_metrics_event(self):
        # SDK create-latency telemetry (server api/metrics.py): 204, body ignored.
        self.send_body(204, b"")

    def h_snapshot(self, *a):
        raise lc_error(501, "SANDBOX::API_NOT_SUPPORTED", "Snapshots are not supported by the fake server.")

    def h_create(self):
        fake = self.server.fake
        req = self.json_body()
        if not isinstance(req, dict):
            raise lc_422([detail_item("model_attributes_type", ["body"],
                                      "Input should be a valid dictionary or object to extract fields from", req)])
        errors = []
        image = req.get("image")
        snap = req.get("snapshotId")
        if image is not None:
            if not isinstance(image, dict):
                errors.append(detail_item("model_type", ["body", "image"],
                                          "Input should be a valid dictionary or instance of ImageSpec", image))
            elif not isinstance(image.get("uri"), str):
                errors.append(detail_item("missing" if "uri" not in image else "string_type",
                                          ["body", "image", "uri"],
                                          "Field required" if "uri" not in image else "Input should be a valid string",
                                          image))
        if snap is not None and not isinstance(snap, str):
            errors.append(detail_item("string_type", ["body", "snapshotId"], "Input should be a valid string", snap))
        entry = req.get("entrypoint")
        if entry is not None:
            if not isinstance(entry, list) or not all(isinstance(x, str) for x in entry):
                errors.append(detail_item("list_type", ["body", "entrypoint"], "Input should be a valid list", entry))
            elif len(entry) < 1:
                errors.append(detail_item("too_short", ["body", "entrypoint"],
                                          "List should have at least 1 item after validation, not 0", entry,
                                          {"field_type": "List", "min_length": 1, "actual_length": 0}))
        timeout = req.get("timeout")
        if timeout is not None:
            if isinstance(timeout, float) and timeout.is_integer():
                timeout = int(timeout)
            if isinstance(timeout, str) and re.match(r"^\s*-?\d+\s*$", timeout):
                timeout = int(timeout)
            if not isinstance(timeout, int) or isinstance(timeout, bool):
                errors.append(detail_item("int_type", ["body", "timeout"], "Input should be a valid integer",
                                          req.get("timeout")))
            elif timeout < fake.settings["min_timeout"]:
                errors.append(detail_item("greater_than_equal", ["body", "timeout"],
                                          "Input should be greater than or equal to %d" % fake.settings["min_timeout"],
                                          timeout, {"ge": fake.settings["min_timeout"]}))
        extensions = req.get("extensions") or {}
        rl = req.get("resourceLimits")
        if rl is not None and (not isinstance(rl, dict) or not all(isinstance(v, str) for v in rl.values())):
            errors.append(detail_item("dict_type", ["body", "resourceLimits"], "Input should be a valid dictionary",
                                      rl))
        for fld in ("env", "metadata", "extensions"):
            v = req.get(fld)
            if v is not None and not isinstance(v, dict):
                errors.append(detail_item("dict_type", ["body", fld], "Input should be a valid dictionary", v))
        if errors:
            raise lc_422(errors)
        has_image = isinstance(image, dict) and bool((image.get("uri") or "").strip())
        has_snap = isinstance(snap, str) and bool(snap.strip())
        model_errors = []
        if has_image == has_snap:
            model_errors.append("Exactly one of image or snapshotId must be provided.")
        elif has_image and not entry:
            model_errors.append("entrypoint is required when image is provided.")
        if rl is None and not (isinstance(extensions, dict) and extensions.get("poolRef")):
            model_errors.append("resourceLimits is required unless extensions.poolRef is set.")
        if model_errors:
            raise lc_422([detail_item("value_error", ["body"], "Value error, " + model_errors[0], req,
                                      {"error": {}})])
        # ---- 400-class checks (service layer) ----
        max_t = fake.settings["max_timeout"]
        if timeout is not None and max_t is not None and timeout > max_t:
            raise lc_error(400, "SANDBOX::INVALID_PARAMETER",
                           "Sandbox timeout %ds exceeds configured maximum of %ds." % (timeout, max_t))
        metadata = req.get("metadata")
        if metadata:
            validate_metadata(metadata, "SANDBOX::INVALID_METADATA_LABEL")
        platform = req.get("platform")
        if platform is not None:
            if not isinstance(platform, dict) or platform.get("os") not in ("linux", "windows") \
                    or platform.get("arch") not in ("amd64", "arm64"):
                raise lc_error(400, "SANDBOX::INVALID_PARAMETER",
                               "Invalid platform: os must be one of linux/windows and arch one of amd64/arm64.")
            platform = {"os": platform["os"], "arch": platform["arch"]}
        if isinstance(extensions, dict):
            ext = extensions.get("access.renew.extend.seconds")
            if ext is not None:
                ok = isinstance(ext, str) and ext.isdigit() and 300 <= int(ext) <= 86400
                if not ok:
                    raise lc_error(400, "SANDBOX::INVALID_PARAMETER",
                                   "extensions['access.renew.extend.seconds'] must be a decimal integer string "
                                   "between 300 and 86400.")
            if extensions.get("poolRef"):
                raise lc_error(400, "SANDBOX::UNSUPPORTED_POOL_REF", "poolRef is not supported by the Docker runtime.")
        if req.get("secureAccess") is True:
            raise lc_error(400, "SANDBOX::INVALID_PARAMETER", "secureAccess is not supported by the Docker runtime.")
        # NetworkRule.target: "FQDN or wildcard domain ... IP/CIDR not yet
        # supported" (the spec).  Stricter than a real server may be: a
        # port, an IP or anything else that is not a (wildcard) hostname
        # is a 400, so that pisb cannot pass the fake with what the
        # sidecar would not match.
        pol = req.get("networkPolicy")
        if isinstance(pol, dict):
            for rule in pol.get("egress") or []:
                t = rule.get("target") if isinstance(rule, dict) else None
                h = t[2:] if isinstance(t, str) and t.startswith("*.") else t
                if not isinstance(h, str) or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", h) \
                        or re.match(r"^[0-9.]+$", h):
                    raise lc_error(400, "SANDBOX::INVALID_PARAMETER",
                                   "networkPolicy.egress target %r is not an FQDN or wildcard domain." % (t,))

        sid = str(uuid.uuid4())
        sbx = Sandbox(sid, os.path.join(fake.state_dir, sid))
        for d in ("workspace", "tmp", "root"):
            os.makedirs(os.path.join(sbx.root, d), exist_ok=True)
        os.chmod(os.path.join(sbx.root, "tmp"), 0o1777)
        if fake.exec_mode == "bwrap":
            # pre-create the mount points / symlinks bwrap needs so the
            # sandbox tree looks the same before and after the first command
            for d in HOST_RO_DIRS + ("/proc", "/dev"):
                h = os.path.join(sbx.root, d[1:])
                if os.path.islink(d):
                    os.symlink(os.readlink(d), h)
                elif os.path.isdir(d):
                    os.makedirs(h, exist_ok=True)
        os.makedirs(sbx.execd_dir, exist_ok=True)
        if has_image:
            sbx.image = {"uri": image["uri"]}
            sbx.entrypoint = list(entry)
        else:
            sbx.snapshot_id = snap
            sbx.entrypoint = list(entry) if entry else ["tail", "-f", "/dev/null"]
        sbx.platform = platform
        sbx.metadata = dict(metadata) if isinstance(metadata, dict) else None
        sbx.env = {k: v for k, v in (req.get("env") or {}).items() if isinstance(v, str)}
        sbx.create_request = req
        if timeout is not None:
            sbx.expires_us = sbx.created_us + timeout * 1_000_000
        with fake.lock:
            pend = fake.settings["pending_ms"]
            if pend > 0:
                fake.set_state(sbx, "Pending", then="Running", after_ms=pend)
            else:
                fake.set_state(sbx, "Running")
            fake.sandboxes[sid] = sbx
            body = {"id": sid, "status": fake.status_obj(sbx)}
            if sbx.metadata is not None:
                body["metadata"] = dict(sbx.metadata)
            if sbx.expires_us is not None:
                body["expiresAt"] = fmt_lifecycle_time(sbx.expires_us)
            body["createdAt"] = fmt_lifecycle_time(sbx.created_us)
            body["entrypoint"] = list(sbx.entrypoint)
            if sbx.platform is not None:
                body["platform"] = sbx.platform
        self.send_lc_json(202, body)

    def h_list(self):
        fake = self.server.fake
        q = self.query
        errors = []

        def int_param(name, default, lo, hi):
            raw = q.get(name, [None])[-1]
            if raw is None:
                return default
            try:
                v = int(raw)
            except ValueError:
                errors.append(detail_item("int_parsing", ["query", name],
                                          "Input should be a valid integer, unable to parse string as an integer",
                                          raw))
                return default
            if v < lo:
                errors.append(detail_item("greater_than_equal", ["query", name],
                                          "Input should be greater than or equal to %d" % lo, raw, {"ge": lo}))
            elif hi is not None and v > hi:
                errors.append(detail_item("less_than_equal", ["query", name],
                                          "Input should be less than or equal to %d" % hi, raw, {"le": hi}))
            return v

        page = int_param("page", 1, 1, None)
        page_size = int_param("pageSize", 20, 1, 200)
        if errors:
            raise lc_422(errors)
        states = [s.lower() for s in q.get("state", []) if s != ""]
        md_filter = None
        if "metadata" in q:
            raw = q["metadata"][-1]
            try:
                md_filter = parse_qsl(raw, keep_blank_values=True, strict_parsing=True) if raw else []
            except ValueError as e:
                raise lc_error(400, "INVALID_METADATA_FORMAT", "Invalid metadata format: %s" % e)
        with fake.lock:
            items = []
            for sid in list(fake.sandboxes):
                sbx = fake.lookup(sid)
                if sbx is None:
                    continue
                if states and sbx.state.lower() not in states:
                    continue
                if md_filter:
                    md = sbx.metadata or {}
                    if not all(md.get(k) == v for k, v in md_filter):
                        continue
                items.append(sbx)
            items.sort(key=lambda s: s.created_us, reverse=True)
            total = len(items)
            pages = (total + page_size - 1) // page_size if total else 0
            chunk = items[(page - 1) * page_size: page * page_size]
            body = {"items": [fake.sandbox_obj(s) for s in chunk],
                    "pagination": {"page": page, "pageSize": page_size, "totalItems": total,
                                   "totalPages": pages, "hasNextPage": page < pages}}
        self.send_lc_json(200, body)

    def h_get(self, sid):
        fake = self.server.fake
        sbx = self.need_sandbox(sid)
        with fake.lock:
            body = fake.sandbox_obj(sbx)
        self.send_lc_json(200, body)

    def h_delete(self, sid):
        fake = self.server.fake
        sbx = self.need_sandbox(sid)
        fake.remove_sandbox(sbx, "deleted")
        self.send_body(204, b"")

    def h_patch(self, sid):
        fake = self.server.fake
        sbx = self.need_sandbox(sid)
        patch = self.json_body()
        if not isinstance(patch, dict):
            raise lc_422([detail_item("dict_type", ["body"], "Input should be a valid dictionary", patch)])
        for k, v in patch.items():
            if v is not None and not isinstance(v, str):
                raise lc_422([detail_item("string_type", ["body", k], "Input should be a valid string", v)])
        for k in patch:  # reserved keys first; PATCH uses the bare code
            if k.startswith(RESERVED_PREFIX):
                validate_metadata({k: ""}, "INVALID_METADATA_LABEL")
        validate_metadata({k: v for k, v in patch.items() if v is not None}, "SANDBOX::INVALID_METADATA_LABEL")
        with fake.lock:
            md = dict(sbx.metadata or {})
            for k, v in patch.items():
                if v is None:
                    md.pop(k, None)
                else:
                    md[k] = v
            sbx.metadata = md
            body = fake.sandbox_obj(sbx)
        self.send_lc_json(200, body)

    def h_pause(self, sid):
        fake = self.server.fake
        sbx = self.need_sandbox(sid)
        with fake.lock:
            if sbx.state != "Running":
                raise lc_error(409, "DOCKER::SANDBOX_NOT_RUNNING", "Sandbox is not in a running state.")
            fake.set_state(sbx, "Pausing", then="Paused", after_ms=fake.settings["pausing_ms"])
        self.send_body(202, b"")

    def h_resume(self, sid):
        fake = self.server.fake
        sbx = self.need_sandbox(sid)
        with fake.lock:
            if sbx.state != "Paused":
                raise lc_error(409, "DOCKER::SANDBOX_NOT_PAUSED", "Sandbox is not in a paused state.")
            if fake.settings["execd_token"]:
                sbx.token = secrets.token_hex(16)  # endpoint headers change across resume
            fake.set_state(sbx, "Resuming", then="Running", after_ms=fake.settings["resuming_ms"])
        self.send_body(202, b"")

    def h_renew(self, sid):
        fake = self.server.fake
        req = self.json_body()
        if not isinstance(req, dict):
            raise lc_422([detail_item("model_attributes_type", ["body"],
                                      "Input should be a valid dictionary or object to extract fields from", req)])
        errors = []
        if "expiresAt" not in req:
            errors.append(detail_item("missing", ["body", "expiresAt"], "Field required", req))
        for k in req:
            if k != "expiresAt":
                errors.append(detail_item("extra_forbidden", ["body", k], "Extra inputs are not permitted", req[k]))
        new_us = None
        if "expiresAt" in req:
            try:
                new_us = parse_datetime_us(req["expiresAt"])
            except ValueError as e:
                errors.append(detail_item("datetime_from_date_parsing", ["body", "expiresAt"],
                                          "Input should be a valid datetime or date, %s" % e, req["expiresAt"],
                                          {"error": str(e)}))
        if errors:
            raise lc_422(errors)
        sbx = self.need_sandbox(sid)
        if new_us <= now_us():
            raise lc_error(400, "DOCKER::INVALID_EXPIRATION", "New expiration time must be in the future.")
        with fake.lock:
            if sbx.expires_us is None:
                raise lc_error(409, "DOCKER::INVALID_EXPIRATION",
                               "Sandbox %s does not have automatic expiration enabled." % sid)
            if sbx.gone:
                raise lc_error(404, "DOCKER::SANDBOX_NOT_FOUND", "Sandbox %s not found." % sid)
            if fake.settings["renew_after_current"] and new_us <= sbx.expires_us:
                raise lc_error(400, "DOCKER::INVALID_EXPIRATION",
                               "New expiration time must be after the current expiresAt (%s)."
                               % fmt_lifecycle_time(sbx.expires_us))
            sbx.expires_us = new_us
        self.send_lc_json(200, {"expiresAt": fmt_lifecycle_time(new_us)})

    def h_endpoint(self, sid, port_s):
        fake = self.server.fake
        try:
            port = int(port_s)
        except ValueError:
            raise lc_422([detail_item("int_parsing", ["path", "port"],
                                      "Input should be a valid integer, unable to parse string as an integer",
                                      port_s)])
        usp_raw = self.query.get("use_server_proxy", [None])[-1]
        use_proxy = False
        if usp_raw is not None:
            low = usp_raw.lower()
            if low in ("true", "1", "yes", "on", "t", "y"):
                use_proxy = True
            elif low in ("false", "0", "no", "off", "f", "n"):
                use_proxy = False
            else:
                raise lc_422([detail_item("bool_parsing", ["query", "use_server_proxy"],
                                          "Input should be a valid boolean, unable to interpret input", usp_raw)])
        expires = self.query.get("expires", [None])[-1]
        sbx = self.need_sandbox(sid)
        if expires is not None and use_proxy:
            raise lc_error(400, "SANDBOX::INVALID_PARAMETER", "expires cannot be combined with use_server_proxy=true.")
        if expires is not None:
            raise lc_error(400, "SANDBOX::API_NOT_SUPPORTED", "Signed endpoints are not supported by this runtime.")
        if port < 1 or port > 65535:
            raise lc_error(400, "DOCKER::INVALID_PORT", "Port must be between 1 and 65535, got %d." % port)
        body = {"endpoint": fake.endpoint_for(sbx, port)}
        if fake.settings["execd_token"] and port == EXECD_PORT:
            with fake.lock:
                body["headers"] = {"X-EXECD-ACCESS-TOKEN": sbx.token}
        self.send_lc_json(200, body)

    # ---- execd -----------------------------------------------------------

    def h_execd_proxy(self, sid, port, rest):
        fake = self.server.fake
        sbx = self.need_sandbox(sid)
        if port != EXECD_PORT:
            raise lc_error(502, "BACKEND_CONNECTION_FAILED",
                           "Could not connect to the backend sandbox endpoint='127.0.0.1:%d' headers=None: "
                           "All connection attempts failed" % port)
        self.wait_execd_reachable(sbx)
        if fake.settings["execd_token"]:
            with fake.lock:
                want = sbx.token
            if self.headers.get("X-EXECD-ACCESS-TOKEN") != want:
                raise HttpError(401, {"error": "Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN"},
                                go=True)
        method = self.command
        for (rm, rx, eop) in EXECD_ROUTES:
            m = rx.match(rest)
            if m and rm == method:
                self.sbx = sbx
                return getattr(self, "x_" + eop)(*[unquote(g) for g in m.groups()])
        # gin default 404
        raise HttpError(404, b"404 page not found", content_type="text/plain")

    def wait_execd_reachable(self, sbx):
        fake = self.server.fake
        unreachable = lc_error(502, "BACKEND_CONNECTION_FAILED",
                               "Could not connect to the backend sandbox endpoint='127.0.0.1:%d' headers=None: "
                               "All connection attempts failed" % EXECD_PORT)
        deadline = time.time() + fake.settings["paused_hang_ms"] / 1000.0
        while True:
            with fake.lock:
                fake._advance(sbx, now_us())
                state = sbx.state
                gone = sbx.gone
            if gone:
                raise unreachable
            if state == "Running":
                return
            if state == "Pending" or fake.settings["paused_execd"] != "hang":
                raise unreachable
            if time.time() >= deadline:
                raise lc_error(500, "GENERAL::UNKNOWN_ERROR", "An internal error occurred in the proxy: ReadTimeout")
            time.sleep(0.05)

    # path mapping: sandbox path <-> host path under sbx.root
    def hpath(self, p):
        sbx = self.sbx
        if p == "~" or p.startswith("~/"):
            p = "/root" + p[1:]
        if not p.startswith("/"):
            p = "/" + p
        norm = posixpath.normpath(p)
        norm = "/" + norm.lstrip("/")
        return sbx.root if norm == "/" else os.path.join(sbx.root, norm[1:])

    def spath(self, hp):
        rel = os.path.relpath(hp, self.sbx.root)
        return "/" if rel == "." else "/" + rel

    def file_info(self, hp, st=None):
        st = st or os.lstat(hp)
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        if stat.S_ISLNK(st.st_mode):
            typ = "symlink"
        elif stat.S_ISDIR(st.st_mode):
            typ = "directory"
        elif stat.S_ISREG(st.st_mode):
            typ = "file"
        else:
            typ = "other"
        return {"path": self.spath(hp), "type": typ, "size": st.st_size,
                "modified_at": fmt_go_time(st.st_mtime_ns), "created_at": fmt_go_time(st.st_ctime_ns),
                "owner": owner, "group": group, "mode": int(format(stat.S_IMODE(st.st_mode) & 0o777, "o"))}

    def not_found(self, p, detail="no such file or directory"):
        return ex_error(404, "FILE_NOT_FOUND", "file not found. %s: %s" % (p, detail))

    def go_body_json(self, expect):
        try:
            v = json.loads(self.body or b"")
        except (ValueError, UnicodeDecodeError) as e:
            raise ex_error(400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. %s" % e)
        if not isinstance(v, expect):
            raise ex_error(400, "INVALID_REQUEST_BODY",
                           "error parsing request, MAYBE invalid body format. json: cannot unmarshal %s"
                           % type(v).__name__)
        return v

    @staticmethod
    def octal_mode(mode):
        try:
            return int(str(int(mode)), 8)
        except (TypeError, ValueError):
            raise ValueError("strconv.ParseUint: parsing %r: invalid syntax" % (mode,))

    @staticmethod
    def chown(hp, owner, group):
        if not owner and not group:
            return
        uid = pwd.getpwnam(owner).pw_uid if owner else -1
        gid = grp.getgrnam(group).gr_gid if group else -1
        os.chown(hp, uid, gid)

    def x_ping(self):
        self.send_body(200, b"")

    # -- files --

    def x_files_info(self):
        out = {}
        for p in self.query.get("path", []):
            hp = self.hpath(p)
            try:
                out[p] = self.file_info(hp)
            except FileNotFoundError:
                raise self.not_found(p)
            except OSError as e:
                raise ex_error(500, "RUNTIME_ERROR", "error accessing file: %s" % e.strerror)
        self.send_go_json(200, out)

    def x_files_delete(self):
        for p in self.query.get("path", []):
            hp = self.hpath(p)
            try:
                if os.path.isdir(hp):
                    raise ex_error(500, "RUNTIME_ERROR", "error removing file %s. path is a directory: %s" % (p, p))
                os.remove(hp)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise ex_error(500, "RUNTIME_ERROR", "error removing file %s. %s" % (p, e.strerror))
        self.send_body(200, b"")

    def x_files_permissions(self):
        req = self.go_body_json(dict)
        for p, perm in req.items():
            hp = self.hpath(p)
            try:
                perm = perm or {}
                mode = perm.get("mode") or 0
                if mode:
                    os.chmod(hp, self.octal_mode(mode))
                self.chown(hp, perm.get("owner"), perm.get("group"))
            except (OSError, KeyError, ValueError) as e:
                raise ex_error(500, "RUNTIME_ERROR", "error changing permissions for %s. %s" % (p, e))
        self.send_body(200, b"")

    def x_files_mv(self):
        req = self.go_body_json(list)
        for item in req:
            src, dest = (item or {}).get("src", ""), (item or {}).get("dest", "")
            hs, hd = self.hpath(src), self.hpath(dest)
            if not os.path.lexists(hs):
                raise self.not_found(src, "source path not found")
            os.makedirs(os.path.dirname(hd), exist_ok=True)
            if os.path.lexists(hd):
                raise ex_error(500, "RUNTIME_ERROR", "error accessing file: destination path already exists: %s" % dest)
            try:
                os.rename(hs, hd)
            except OSError as e:
                raise ex_error(500, "RUNTIME_ERROR", "error accessing file: failed to rename file: %s" % e.strerror)
        self.send_body(200, b"")

    def x_files_search(self):
        p = self.query.get("path", [""])[-1]
        if not p:
            raise ex_error(400, "MISSING_QUERY", "missing query parameter 'path'")
        hp = self.hpath(p)
        if not os.path.exists(hp):
            raise self.not_found(p)
        pattern = self.query.get("pattern", [""])[-1] or "**"
        fpat = pattern.replace("**", "*").replace("[^", "[!")
        found = []

        def visit(h):
            try:
                st = os.lstat(h)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode):
                for name in sorted(os.listdir(h)):
                    visit(os.path.join(h, name))
                return
            if fnmatch.fnmatchcase(os.path.basename(h), fpat):
                found.append(self.file_info(h, st))

        visit(hp)
        self.send_go_json(200, found)

    def x_files_replace(self):
        verbose = self.query.get("verbose", [""])[-1] == "true"
        req = self.go_body_json(dict)
        results = {}
        for p, item in req.items():
            hp = self.hpath(p)
            if not os.path.exists(hp):
                raise self.not_found(p)
            item = item or {}
            old, new = item.get("old", ""), item.get("new", "")
            if old == "":
                raise ex_error(400, "INVALID_REQUEST_BODY", "old content must not be empty")
            with open(hp, "rb") as f:
                content = f.read().decode("utf-8", errors="surrogateescape")
            n = content.count(old)
            with open(hp, "wb") as f:
                f.write(content.replace(old, new).encode("utf-8", errors="surrogateescape"))
            results[p] = {"replacedCount": n}
        if verbose:
            self.send_go_json(200, results)
        else:
            self.send_body(200, b"")

    def x_upload(self):
        fake = self.server.fake
        ctype = self.headers.get("Content-Type", "")
        try:
            parts = parse_multipart(self.body, ctype)
        except ValueError:
            raise ex_error(400, "INVALID_FILE", "multipart form is empty")
        metas = [c for (name, fname, c) in parts if name == "metadata" and fname is not None]
        files = [c for (name, fname, c) in parts if name == "file" and fname is not None]
        if not metas:
            raise ex_error(400, "INVALID_FILE_METADATA", "metadata file is missing")
        if not files:
            raise ex_error(400, "INVALID_FILE_CONTENT", "file is missing")
        if len(metas) != len(files):
            raise ex_error(400, "INVALID_FILE", "metadata and file count mismatch: %d vs %d"
                           % (len(metas), len(files)))
        for meta_raw, data in zip(metas, files):
            try:
                meta = json.loads(meta_raw)
                if not isinstance(meta, dict):
                    raise ValueError("json: cannot unmarshal into FileMetadata")
            except (ValueError, UnicodeDecodeError) as e:
                raise ex_error(400, "INVALID_FILE_METADATA", "invalid metadata format. %s" % e)
            path = meta.get("path") or ""
            if not path:
                raise ex_error(400, "INVALID_FILE_METADATA", "metadata path is empty")
            hp = self.hpath(path)
            with fake.lock:
                corrupt = fake.settings["corrupt_uploads"] > 0 and len(data) > 0
                if corrupt:
                    fake.settings["corrupt_uploads"] -= 1
            if corrupt:
                data = bytearray(data)
                data[len(data) // 2] ^= 0x01
            try:
                os.makedirs(os.path.dirname(hp), exist_ok=True)
            except OSError as e:
                raise ex_error(500, "RUNTIME_ERROR", "error creating target directory %s. %s"
                               % (posixpath.dirname(path), e.strerror))
            try:
                fd = os.open(hp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o777)
                try:
                    view = memoryview(data)
                    while view:
                        n = os.write(fd, view)
                        view = view[n:]
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                raise ex_error(500, "RUNTIME_ERROR", "error opening destination file %s. %s" % (path, e.strerror))
            try:
                mode = meta.get("mode") or 0
                if mode:
                    os.chmod(hp, self.octal_mode(mode))
                self.chown(hp, meta.get("owner"), meta.get("group"))
            except (OSError, KeyError, ValueError) as e:
                raise ex_error(500, "RUNTIME_ERROR", "error chmoding file %s. %s" % (path, e))
        self.send_body(200, b"")

    def x_download(self):
        p = self.query.get("path", [""])[-1]
        if not p:
            raise ex_error(400, "MISSING_QUERY", "missing query parameter 'path'")
        hp = self.hpath(p)
        off_s = self.query.get("offset", [""])[-1]
        lim_s = self.query.get("limit", [""])[-1]
        if off_s or lim_s:
            if not (off_s and lim_s):
                raise ex_error(400, "INVALID_REQUEST_BODY",
                               "both offset and limit must be provided together for line-based reading")
            if self.headers.get("Range"):
                raise ex_error(400, "INVALID_REQUEST_BODY", "Range header cannot be combined with offset/limit")
            try:
                off = int(off_s)
                assert off >= 1
            except (ValueError, AssertionError):
                raise ex_error(400, "INVALID_REQUEST_BODY", "offset must be a positive integer (1-based)")
            try:
                lim = int(lim_s)
                assert lim >= 1
            except (ValueError, AssertionError):
                raise ex_error(400, "INVALID_REQUEST_BODY", "limit must be a positive integer")
            try:
                with open(hp, "rb") as f:
                    lines = f.read().splitlines(keepends=True)
            except FileNotFoundError:
                raise self.not_found(p)
            except IsADirectoryError:
                raise ex_error(500, "RUNTIME_ERROR", "error reading file: is a directory")
            # execd writes the selected lines verbatim (terminators included)
            return self.send_body(200, b"".join(lines[off - 1: off - 1 + lim]), "text/plain")
        try:
            with open(hp, "rb") as f:
                data = f.read()
                st = os.fstat(f.fileno())
        except FileNotFoundError:
            raise self.not_found(p)
        except IsADirectoryError:
            raise ex_error(500, "RUNTIME_ERROR", "error accessing file: read %s: is a directory" % p)
        except OSError as e:
            raise ex_error(500, "RUNTIME_ERROR", "error accessing file: %s" % e.strerror)
        name = os.path.basename(hp)
        if all(ord(ch) < 128 for ch in name):
            disp = 'attachment; filename="%s"' % name
        else:
            from urllib.parse import quote
            enc = quote(name, safe="")
            disp = "attachment; filename=\"%s\"; filename*=UTF-8''%s" % (enc, enc)
        size = len(data)
        headers = {"Content-Disposition": disp, "Accept-Ranges": "bytes",
                   "Last-Modified": _dt.datetime.fromtimestamp(st.st_mtime, _dt.timezone.utc)
                   .strftime("%a, %d %b %Y %H:%M:%S GMT")}
        rng = self.headers.get("Range")
        if rng:
            try:
                ranges = parse_range(rng, size)
            except ValueError:
                raise ex_error(416, "UNKNOWN", "")
            if not ranges:
                return self.send_body(416, b"invalid range: failed to overlap\n", "text/plain; charset=utf-8",
                                      {"Content-Range": "bytes */%d" % size})
            start, length = ranges[0]
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, start + length - 1, size)
            return self.send_body(206, data[start:start + length], "application/octet-stream", headers)
        self.send_body(200, data, "application/octet-stream", headers)

    def x_dirs_list(self):
        p = self.query.get("path", [""])[-1]
        if not p:
            raise ex_error(400, "MISSING_QUERY", "missing query parameter 'path'")
        depth_s = self.query.get("depth", [""])[-1]
        depth = 1
        if depth_s:
            try:
                depth = int(depth_s)
                assert depth >= 0
            except (ValueError, AssertionError):
                raise ex_error(400, "INVALID_REQUEST_BODY", "invalid query parameter 'depth': %s" % depth_s)
        hp = self.hpath(p)
        try:
            st = os.lstat(hp)
        except FileNotFoundError:
            raise self.not_found(p)
        if stat.S_ISLNK(st.st_mode):
            raise ex_error(400, "INVALID_REQUEST_BODY",
                           "path is a symbolic link, refusing to traverse: %s" % self.spath(hp))
        if not stat.S_ISDIR(st.st_mode):
            raise ex_error(400, "INVALID_REQUEST_BODY", "path is not a directory: %s" % self.spath(hp))
        out = []

        def walk(d, cur):
            for name in sorted(os.listdir(d)):
                h = os.path.join(d, name)
                est = os.lstat(h)
                out.append(self.file_info(h, est))
                if stat.S_ISDIR(est.st_mode) and cur + 1 < depth:
                    walk(h, cur + 1)

        if depth > 0:
            walk(hp, 0)
        self.send_go_json(200, out)

    def x_dirs_make(self):
        req = self.go_body_json(dict)
        for p, perm in req.items():
            perm = perm or {}
            hp = self.hpath(p)
            existed = os.path.exists(hp)
            try:
                os.makedirs(hp, 0o777, exist_ok=True)
                if not existed:
                    self.chown(hp, perm.get("owner"), perm.get("group"))
                    if perm.get("mode"):
                        os.chmod(hp, self.octal_mode(perm["mode"]))
            except FileNotFoundError:
                raise self.not_found(p)
            except (OSError, KeyError, ValueError) as e:
                raise ex_error(500, "RUNTIME_ERROR", "error accessing file: mkdir %s: %s"
                               % (p, getattr(e, "strerror", None) or e))
        self.send_body(200, b"")

    def x_dirs_delete(self):
        for p in self.query.get("path", []):
            hp = self.hpath(p)
            if hp == self.sbx.root:
                # never remove the scratch root itself; empty it instead
                for name in os.listdir(hp):
                    h = os.path.join(hp, name)
                    if os.path.isdir(h) and not os.path.islink(h):
                        shutil.rmtree(h, ignore_errors=True)
                    else:
                        os.remove(h)
                continue
            try:
                if os.path.isdir(hp) and not os.path.islink(hp):
                    shutil.rmtree(hp)
                elif os.path.lexists(hp):
                    os.remove(hp)
            except OSError as e:
                raise ex_error(500, "RUNTIME_ERROR", "error removing directory %s. %s" % (p, e.strerror))
        self.send_body(200, b"")

    # -- commands --

    def x_command(self):
        fake = self.server.fake
        sbx = self.sbx
        try:
            req = json.loads(self.body or b"")
            if not isinstance(req, dict):
                raise ValueError("json: cannot unmarshal %s into Go value of type model.RunCommandRequest"
                                 % type(req).__name__)
        except (ValueError, UnicodeDecodeError) as e:
            raise ex_error(400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. %s" % e)
        command = req.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ex_error(400, "INVALID_REQUEST_BODY",
                           "invalid request, validation error Key: 'RunCommandRequest.Command' Error:Field "
                           "validation for 'Command' failed on the 'required' tag")
        timeout = req.get("timeout")
        if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1):
            raise ex_error(400, "INVALID_REQUEST_BODY",
                           "invalid request, validation error timeout must be a positive number of milliseconds")
        if req.get("gid") is not None and req.get("uid") is None:
            raise ex_error(400, "INVALID_REQUEST_BODY", "invalid request, validation error uid is required when "
                                                        "gid is provided")
        envs = req.get("envs") or {}
        if not isinstance(envs, dict):
            raise ex_error(400, "INVALID_REQUEST_BODY", "error parsing request, MAYBE invalid body format. "
                                                        "json: cannot unmarshal envs")
        cwd = req.get("cwd") or "/"
        env_all = dict(sbx.env)
        env_all.update({k: str(v) for k, v in envs.items() if v is not None})
        if cwd == "~" or cwd.startswith("~/"):
            cwd = "/root" + cwd[1:]
        cwd = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env_all.get(m.group(1) or m.group(2), ""), cwd)
        hcwd = self.hpath(cwd)
        if not os.path.isdir(hcwd):
            raise ex_error(400, "INVALID_REQUEST_BODY",
                           "invalid request, validation error cwd %s does not exist or is not a directory" % cwd)
        scwd = self.spath(hcwd)
        background = bool(req.get("background"))
        cmd = Command(uuid.uuid4().hex, command, background)

        path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        if fake.settings["command_path"]:
            path = fake.settings["command_path"]
            if fake.exec_mode != "bwrap":
                path = ":".join(self.hpath(d) for d in path.split(":"))
        env = {"PATH": path, "LANG": "C.UTF-8",
               "HOME": "/root" if fake.exec_mode == "bwrap" else os.path.join(sbx.root, "root"),
               "OPENSANDBOX_FAKE_ROOT": "/" if fake.exec_mode == "bwrap" else sbx.root,
               "OPENSANDBOX_SANDBOX_ID": sbx.id}
        env.update(env_all)
        if fake.exec_mode == "bwrap":
            argv = fake._bwrap_argv(sbx.root, scwd) + [fake.bwrap_shell, "-c", command]
            popen_cwd = sbx.root
        else:
            argv = [fake.shell, "-c", command]
            popen_cwd = hcwd

        with fake.lock:
            if sbx.gone:
                raise lc_error(502, "BACKEND_CONNECTION_FAILED", "sandbox is gone")
            sbx.commands[cmd.id] = cmd
        if background:
            return self.run_background(sbx, cmd, argv, popen_cwd, env, timeout)
        return self.run_foreground(sbx, cmd, argv, popen_cwd, env, timeout)

    def _event(self, typ, text=None, execution_time=None, error=None):
        d = {"type": typ}
        if text:
            d["text"] = text
        if execution_time:
            d["execution_time"] = execution_time
        d["timestamp"] = now_ms()
        if error:
            d["error"] = error
        return go_json(d) + b"\n\n"

    def _sse_start(self):
        self.start_stream(200, "text/event-stream", {"Cache-Control": "no-cache", "Connection": "keep-alive",
                                                     "X-Accel-Buffering": "no"})

    def _spawn(self, cmd, argv, cwd, env, stdout, stderr):
        cmd.proc = self.server.fake.spawner.popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout,
                                                  stderr=stderr, start_new_session=True, close_fds=True)
        cmd.started_ns = time.time_ns()

    def _watch(self, cmd, timeout_ms):
        """Wait for the process (enforcing the timeout) and record exit info."""
        try:
            cmd.proc.wait(timeout=timeout_ms / 1000.0 if timeout_ms else None)
        except subprocess.TimeoutExpired:
            cmd.timed_out = True
            cmd.signal_group(signal.SIGKILL)
            cmd.signal_group(signal.SIGCONT)
            cmd.proc.wait()
        rc = cmd.proc.returncode
        if rc >= 0:
            cmd.exit_code = rc
            cmd.error = "" if rc == 0 else "exit status %d" % rc
        else:
            cmd.exit_code = -1
            try:
                name = signal.strsignal(-rc) or ("signal %d" % -rc)
            except ValueError:
                name = "signal %d" % -rc
            cmd.error = "signal: %s" % name.split(":")[0].lower()
        cmd.finished_ns = time.time_ns()
        cmd.done.set()

    def run_background(self, sbx, cmd, argv, cwd, env, timeout):
        cmd.log_path = os.path.join(sbx.execd_dir, "%s.output" % cmd.id)
        try:
            with open(cmd.log_path, "wb") as logf:
                self._spawn(cmd, argv, cwd, env, logf, subprocess.STDOUT)
        except OSError as e:
            cmd.exit_code, cmd.error = -1, str(e)
            cmd.done.set()
            self._sse_start()
            self.write_chunk(self._event("init", text=cmd.id))
            self.write_chunk(self._event("error", error={"ename": "CommandExecError", "evalue": str(e),
                                                         "traceback": [str(e)]}))
            self.end_stream()
            return
        threading.Thread(target=self._watch, args=(cmd, timeout), daemon=True).start()
        self._sse_start()
        self.write_chunk(self._event("init", text=cmd.id))
        self.write_chunk(self._event("execution_complete"))
        self._grace()
        self.end_stream()

    def _grace(self):
        g = self.server.fake.settings["stream_grace_ms"]
        if g:
            time.sleep(g / 1000.0)

    def run_foreground(self, sbx, cmd, argv, cwd, env, timeout):
        fake = self.server.fake
        try:
            self._spawn(cmd, argv, cwd, env, subprocess.PIPE, subprocess.PIPE)
        except OSError as e:
            cmd.exit_code, cmd.error = -1, str(e)
            cmd.done.set()
            self._sse_start()
            self.write_chunk(self._event("init", text=cmd.id))
            self.write_chunk(self._event("error", error={"ename": "CommandExecError", "evalue": str(e),
                                                         "traceback": [str(e)]}))
            self._grace()
            self.end_stream()
            return
        q = queue.Queue()

        def reader(name, pipe):
            sp = LineSplitter()
            fd = pipe.fileno()
            try:
                while True:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    for line in sp.feed(chunk):
                        q.put((name, line))
            except OSError:
                pass
            finally:
                for line in sp.flush():
                    q.put((name, line))
                q.put((name, None))
                try:
                    pipe.close()
                except OSError:
                    pass

        threading.Thread(target=reader, args=("stdout", cmd.proc.stdout), daemon=True).start()
        threading.Thread(target=reader, args=("stderr", cmd.proc.stderr), daemon=True).start()
        threading.Thread(target=self._watch, args=(cmd, timeout), daemon=True).start()

        client_ok = True

        def send(data):
            nonlocal client_ok
            if not client_ok:
                return
            try:
                self.write_chunk(data)
            except OSError:
                client_ok = False  # client went away; the command keeps running

        try:
            self._sse_start()
        except OSError:
            client_ok = False
        send(self._event("init", text=cmd.id))
        send(self._event("ping", text="pong"))
        last_ping = time.time()
        open_streams = 2
        exited_at = None
        while open_streams > 0:
            try:
                item = q.get(timeout=0.05)
            except queue.Empty:
                item = None
            if sbx.gone:
                # the container is gone: the connection drops, no terminal event
                raise AbortConnection()
            if item is not None:
                name, text = item
                if text is None:
                    open_streams -= 1
                else:
                    send(self._event(name, text=text))
            t = time.time()
            interval = fake.settings["ping_interval_ms"] / 1000.0
            if interval and t - last_ping >= interval:
                with fake.lock:
                    running = sbx.state == "Running"
                if running:
                    send(self._event("ping", text="pong"))
                last_ping = t
            if cmd.done.is_set():
                if exited_at is None:
                    exited_at = t
                elif t - exited_at > 0.25 and q.empty():
                    break  # a grandchild still holds the pipes; execd stops tailing at exit
        cmd.done.wait()
        while True:
            try:
                name, text = q.get_nowait()
            except queue.Empty:
                break
            if text is not None:
                send(self._event(name, text=text))
        if sbx.gone:
            raise AbortConnection()
        if cmd.exit_code == 0:
            ms = (cmd.finished_ns - cmd.started_ns) // 1_000_000
            send(self._event("execution_complete", execution_time=ms))
        else:
            send(self._event("error", error={"ename": "CommandExecError", "evalue": str(cmd.exit_code),
                                             "traceback": [cmd.error]}))
        if not client_ok:
            raise AbortConnection()
        self._grace()
        self.end_stream()

    def _find_cmd(self, cid):
        with self.server.fake.lock:
            return self.sbx.commands.get(cid)

    def x_interrupt(self):
        cid = self.query.get("id", [""])[-1]
        if not cid:
            raise ex_error(400, "MISSING_QUERY", "missing query parameter 'id'")
        cmd = self._find_cmd(cid)
        if cmd is None:
            raise ex_error(500, "RUNTIME_ERROR", "error interruptting code context. no such session: %s" % cid)
        if cmd.done.is_set():
            raise ex_error(500, "RUNTIME_ERROR",
                           "error interruptting code context. command session %s is not running" % cid)
        cmd.signal_group(signal.SIGTERM)
        cmd.signal_group(signal.SIGCONT)
        if not cmd.done.wait(3.0):
            cmd.signal_group(signal.SIGKILL)
            cmd.done.wait(2.0)
        self.send_body(200, b"")

    def x_command_status(self, cid):
        cmd = self._find_cmd(cid)
        if cmd is None:
            raise ex_error(404, "INVALID_REQUEST_BODY", "command not found: %s" % cid)
        d = {"id": cmd.id, "content": cmd.content, "running": not cmd.done.is_set()}
        if cmd.done.is_set():
            d["exit_code"] = cmd.exit_code
            if cmd.error:
                d["error"] = cmd.error
        d["started_at"] = fmt_go_time(cmd.started_ns)
        if cmd.done.is_set():
            d["finished_at"] = fmt_go_time(cmd.finished_ns)
        self.send_go_json(200, d)

    def x_command_logs(self, cid):
        cmd = self._find_cmd(cid)
        if cmd is None:
            raise ex_error(400, "INVALID_REQUEST_BODY", "command not found: %s" % cid)
        if not cmd.background:
            raise ex_error(400, "INVALID_REQUEST_BODY", "command %s is not running in background" % cid)
        raw = self.query.get("cursor", ["0"])[-1]
        try:
            cursor = max(0, int(raw))
        except ValueError:
            cursor = 0
        try:
            with open(cmd.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                end = f.tell()
                f.seek(min(cursor, end))
                data = f.read(end - min(cursor, end))
        except OSError:
            data, end = b"", 0
        self.send_body(200, data, "text/plain; charset=utf-8", {"EXECD-COMMANDS-TAIL-CURSOR": str(end)})


# --------------------------------------------------------------------------
# multipart / range helpers
# --------------------------------------------------------------------------

_CD_PARAM = re.compile(r';\s*([A-Za-z0-9_*-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))')


def parse_multipart(body, ctype):
    """Return [(name, filename or None, content bytes)].  Raises ValueError."""
    if "multipart/form-data" not in ctype.lower():
        raise ValueError("not multipart")
    m = re.search(r'boundary=(?:"([^"]+)"|([^;\s]+))', ctype, re.I)
    if not m:
        raise ValueError("no boundary")
    delim = b"--" + (m.group(1) or m.group(2)).encode("latin-1")
    pos = body.find(delim)
    if pos < 0:
        raise ValueError("no parts")
    pos += len(delim)
    parts = []
    while True:
        if body[pos:pos + 2] == b"--":
            break
        if body[pos:pos + 2] == b"\r\n":
            pos += 2
        elif body[pos:pos + 1] == b"\n":
            pos += 1
        else:
            raise ValueError("malformed delimiter")
        nxt = body.find(b"\r\n" + delim, pos)
        if nxt < 0:
            raise ValueError("unterminated part")
        part = body[pos:nxt]
        sep = part.find(b"\r\n\r\n")
        if sep < 0:
            head, content = part, b""
        else:
            head, content = part[:sep], part[sep + 4:]
        name = fname = None
        for line in head.split(b"\r\n"):
            k, _, v = line.decode("utf-8", errors="replace").partition(":")
            if k.strip().lower() == "content-disposition":
                for pm in _CD_PARAM.finditer(";" + v.split(";", 1)[1] if ";" in v else ""):
                    key = pm.group(1).lower()
                    val = pm.group(2) if pm.group(2) is not None else (pm.group(3) or "").strip()
                    val = re.sub(r"\\(.)", r"\1", val) if pm.group(2) is not None else val
                    if key == "name":
                        name = val
                    elif key == "filename":
                        fname = val
        parts.append((name, fname, content))
        pos = nxt + 2 + len(delim)
    return parts


def parse_range(s, size):
    """execd ParseRange semantics: list of (start, length); ValueError if malformed."""
    if not s.startswith("bytes="):
        raise ValueError("invalid range")
    out = []
    for ra in s[6:].split(","):
        ra = ra.strip()
        if not ra:
            continue
        if "-" not in ra:
            raise ValueError("invalid range")
        start, end = (x.strip() for x in ra.split("-", 1))
        if start == "":
            if not end.isdigit():
                raise ValueError("invalid range")
            n = min(int(end), size)
            r = (size - n, n)
        else:
            if not start.isdigit():
                raise ValueError("invalid range")
            i = int(start)
            if end == "":
                r = (i, size - i)
            else:
                if not end.isdigit() or int(end) < i:
                    raise ValueError("invalid range")
                r = (i, int(end) - i + 1)
        if r[0] >= size:
            continue
        if r[0] + r[1] > size:
            r = (r[0], size - r[0])
        out.append(r)
    return out


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description="Fake OpenSandbox lifecycle+execd server for tests (NOT a sandbox).")
    ap.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0 = pick a free one)")
    ap.add_argument("--api-key", default=None, help="required OPEN-SANDBOX-API-KEY (omit to disable auth)")
    ap.add_argument("--port-file", default=None, help="write the bound port here (atomically)")
    ap.add_argument("--state-dir", default=None, help="directory for sandbox scratch roots (default: temp dir)")
    ap.add_argument("--exec-mode", choices=("auto", "bwrap", "plain"),
                    default=os.environ.get("OPENSANDBOX_FAKE_EXEC_MODE") or "auto",
                    help="bwrap: commands see the sandbox root as /; plain: only cwd is mapped "
                         "(default: $OPENSANDBOX_FAKE_EXEC_MODE or auto)")
    ap.add_argument("--pending-ms", type=int, default=None)
    ap.add_argument("--pausing-ms", type=int, default=None)
    ap.add_argument("--resuming-ms", type=int, default=None)
    ap.add_argument("--stream-grace-ms", type=int, default=None)
    ap.add_argument("--ping-interval-ms", type=int, default=None)
    ap.add_argument("--latency-ms", type=int, default=None)
    ap.add_argument("--min-timeout", type=int, default=None)
    ap.add_argument("--max-timeout", type=int, default=None)
    ap.add_argument("--execd-token", action="store_true", help="require X-EXECD-ACCESS-TOKEN from endpoint headers")
    ap.add_argument("--paused-execd", choices=("error", "hang"), default=None)
    ap.add_argument("--keep-files", action="store_true", help="do not delete sandbox directories")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    fake = Fake(args)
    httpd = Server(("127.0.0.1", args.port), Handler)
    httpd.fake = fake
    fake.port = httpd.server_address[1]

    def on_signal(signum, frame):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    # install handlers before announcing the port: a SIGTERM right after
    # start-up must still clean up children and the temporary state dir
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.port_file:
        tmp = args.port_file + ".tmp%d" % os.getpid()
        with open(tmp, "w") as f:
            f.write("%d\n" % fake.port)
        os.replace(tmp, args.port_file)
    sys.stdout.write("%d\n" % fake.port)
    sys.stdout.flush()
    sys.stderr.write("opensandbox fake listening on 127.0.0.1:%d (exec mode %s, state %s)\n"
                     % (fake.port, fake.exec_mode, fake.state_dir))
    sys.stderr.flush()

    threading.Thread(target=fake.reaper, daemon=True).start()
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        fake.shutdown_all()
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
