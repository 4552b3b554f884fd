# Airlock Python code context driver. The agent starts python3 with a
# bootstrap that reads this source from fd 0 as one JSON line and runs it
# as "<airlock-driver>".
#
# Protocol (docs/AGENT_PROTOCOL.md, "Code contexts"): fd 0 is a socket to
# the agent. The agent sends one JSON line per run: {"code": str, "env":
# {K: V}}. The driver answers with JSON lines: {"type": "ready"} once at
# start, then per run any number of {"type": "stdout"|"stderr", "data":
# base64} and {"type": "result", "result": {mime: data}}, at most one
# {"type": "error", "error": {name, value, traceback}}, and a final
# {"type": "end"}. fds 1 and 2 stay pipes the agent forwards, for output
# written below Python (subprocesses, C libraries).
#
# SIGINT interrupts the running code (KeyboardInterrupt) and nothing else:
# outside user code, and while a protocol line is being written, it is
# deferred or ignored so the protocol stream never breaks.

import ast
import base64
import builtins
import io
import json
import linecache
import os
import signal
import sys
import threading
import traceback
import types

_CTL = os.dup(0)  # non-inheritable, unlike fd 0
_nullfd = os.open(os.devnull, os.O_RDONLY)
os.dup2(_nullfd, 0)
os.close(_nullfd)

_state = {"user": False, "critical": 0, "pending": False}
_send_lock = threading.Lock()
_main_thread = threading.main_thread()


def _on_sigint(signum, frame):
    if not _state["user"]:
        return
    if _state["critical"]:
        _state["pending"] = True
        return
    raise KeyboardInterrupt


signal.signal(signal.SIGINT, _on_sigint)


def _send(obj):
    line = (json.dumps(obj) + "\n").encode()
    main = threading.current_thread() is _main_thread
    if main:
        _state["critical"] += 1
    try:
        with _send_lock:
            view = memoryview(line)
            while view:
                n = os.write(_CTL, view)
                view = view[n:]
    finally:
        if main:
            _state["critical"] -= 1
    if main and _state["pending"] and not _state["critical"] and _state["user"]:
        _state["pending"] = False
        raise KeyboardInterrupt


class _Channel(io.RawIOBase):
    """Sends what is written as stdout or stderr events."""

    def __init__(self, kind, fd):
        self._kind, self._fd = kind, fd

    def writable(self):
        return True

    def write(self, b):
        data = bytes(b)
        if data:
            _send({"type": self._kind, "data": base64.b64encode(data).decode()})
        return len(data)

    def fileno(self):
        return self._fd


def _stream(kind, fd):
    s = io.TextIOWrapper(io.BufferedWriter(_Channel(kind, fd)), encoding="utf-8",
                         errors="backslashreplace", line_buffering=True)
    s.mode = "w"
    return s


_OUT, _ERR = _stream("stdout", 1), _stream("stderr", 2)
sys.stdout, sys.stderr = _OUT, _ERR
sys.argv = [""]


def _flush():
    for s in (_OUT, _ERR, sys.__stdout__, sys.__stderr__):
        try:
            s.flush()
        except Exception:
            pass


# --- rich outputs ---------------------------------------------------------

_REPR_METHODS = [
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
    ("_repr_javascript_", "application/javascript"),
]
_TEXT_MIMES = {"text/plain", "text/html", "text/markdown", "image/svg+xml",
               "text/latex", "application/javascript"}
_IMAGE_MIMES = {"image/png", "image/jpeg"}


def _normalize(bundle):
    out = {}
    for mime, v in bundle.items():
        if mime in _TEXT_MIMES and isinstance(v, str):
            out[mime] = v
        elif mime in _IMAGE_MIMES and isinstance(v, (bytes, bytearray)):
            out[mime] = base64.b64encode(bytes(v)).decode()
        elif mime in _IMAGE_MIMES and isinstance(v, str):
            out[mime] = v  # already base64, as IPython formatters return it
        elif mime == "application/json":
            if isinstance(v, str):
                try:
                    v = json.loads(v)
                except ValueError:
                    continue
            try:
                json.dumps(v)
            except (TypeError, ValueError):
                continue
            out[mime] = v
    return out


def _is_figure(obj):
    mod = sys.modules.get("matplotlib.figure")
    return mod is not None and isinstance(obj, mod.Figure)


def _figure_bundle(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return {"image/png": buf.getvalue(), "text/plain": repr(fig)}


def _bundle(obj):
    if _is_figure(obj):
        bundle = _figure_bundle(obj)
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None:
            plt.close(obj)  # shown here, not again with the figures
        return _normalize(bundle)
    bundle = {}
    if not isinstance(obj, type):  # a class's _repr_*_ are unbound
        mb = getattr(obj, "_repr_mimebundle_", None)
        if callable(mb):
            try:
                r = mb()
                if isinstance(r, tuple):
                    r = r[0]
                if isinstance(r, dict):
                    bundle.update(r)
            except Exception:
                pass
        for meth, mime in _REPR_METHODS:
            if mime in bundle:
                continue
            f = getattr(obj, meth, None)
            if not callable(f):
                continue
            try:
                v = f()
            except Exception:
                continue
            if isinstance(v, tuple):
                v = v[0]
            if v is not None:
                bundle[mime] = v
    if "text/plain" not in bundle:
        try:
            bundle["text/plain"] = repr(obj)
        except Exception as e:
            bundle["text/plain"] = "<unrepresentable %s: %r>" % (type(obj).__name__, e)
    return _normalize(bundle)


def _send_result(bundle, main=False):
    _flush()
    if bundle:
        _send({"type": "result", "result": bundle, "main": main})


def _capture_figures():
    """Sends every open matplotlib figure as a PNG and closes it."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in list(plt.get_fignums()):
        fig = plt.figure(num)
        try:
            _send_result(_normalize(_figure_bundle(fig)))
        finally:
            plt.close(fig)


def _patch_pyplot(plt):
    orig = plt.show

    def show(*args, **kwargs):
        _capture_figures()

    show.__doc__, show.__wrapped__ = orig.__doc__, orig
    plt.show = show


class _PyplotHook:
    """Patches matplotlib.pyplot.show as soon as pyplot is imported, so
    plt.show() inside a run emits the figures at that point."""

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        import importlib.util
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        orig = spec.loader.exec_module

        def exec_module(module):
            orig(module)
            _patch_pyplot(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PyplotHook())

# --- running code ---------------------------------------------------------

_main = types.ModuleType("__main__")
_main.__dict__["__builtins__"] = builtins
sys.modules["__main__"] = _main  # pickle finds classes defined in runs
_globals = _main.__dict__
_count = 0
_loop = None
_DRIVER_FILE = "<airlock-driver>"
_CO_COROUTINE = 0x80
_FLAGS = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


def _await(coro):
    global _loop
    import asyncio
    if _loop is None:
        _loop = asyncio.new_event_loop()
        asyncio.set_event_loop(_loop)
    return _loop.run_until_complete(coro)


def _evaluate(co):
    v = eval(co, _globals)
    if co.co_flags & _CO_COROUTINE:
        v = _await(v)
    return v


def _error(e, parsing=False):
    if parsing:  # the code did not compile: no frames to show
        lines = traceback.format_exception_only(type(e), e)
    else:
        te = traceback.TracebackException(type(e), e, e.__traceback__)
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if f.filename != _DRIVER_FILE])
        lines = te.format()
    try:
        value = str(e)
    except Exception:
        value = ""
    return {"name": type(e).__name__, "value": value, "traceback": "".join(lines)}


def _compile(code, filename):
    """Compiles code, split so that a final expression can be evaluated
    on its own for its value."""
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), filename, "eval", _FLAGS, True)
    return compile(tree, filename, "exec", _FLAGS, True), last


def _execute(body, last):
    """Runs compiled code as the user's; returns the error, if any."""
    err = None
    try:
        _state["user"] = True
        try:
            _evaluate(body)
            if last is not None:
                value = _evaluate(last)
                if value is not None:
                    _globals["_"] = value
                    _send_result(_bundle(value), main=True)
        except BaseException as e:  # SystemExit too: the context lives on
            err = _error(e)
        # Figures made before an error are shown too, as in a notebook.
        _capture_figures()
    except BaseException as e:
        if err is None:
            err = _error(e)
    finally:
        _state["user"] = False
        _state["pending"] = False
    return err


def _run(cmd):
    global _count
    _count += 1
    code = cmd.get("code", "")
    env = cmd.get("env") or {}
    filename = "<cell %d>" % _count
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    try:
        body, last = _compile(code, filename)
    except (SyntaxError, ValueError, OverflowError) as e:
        _send({"type": "error", "error": _error(e, parsing=True)})
        return
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        err = _execute(body, last)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    _flush()
    if err is not None:
        _send({"type": "error", "error": err})


def _serve():
    _send({"type": "ready", "pid": os.getpid()})
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = os.read(_CTL, 1 << 16)
            if not chunk:
                os._exit(0)  # the agent is gone
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        try:
            _run(json.loads(line))
        except BaseException as e:  # never let the driver itself die
            try:
                _send({"type": "error", "error": _error(e)})
            except BaseException:
                pass
        try:
            _send({"type": "end"})
        except BaseException:
            os._exit(70)


_serve()
