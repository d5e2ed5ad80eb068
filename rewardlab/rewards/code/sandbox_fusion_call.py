"""The function-call driver sent to SandboxFusion: runs THERE, on the remote side, stdlib only.

SandboxFusion's ``/run_code`` runs one file and returns its stdout, so a call into the program
is a file of its own: the value codec of `python_runner` (``encode`` and ``decode``), this
driver, then one line that calls `_serve` with the program's source, the function's name, a
random marker and the codec (`sandbox_fusion.call_code` puts the file together). The arguments
come on stdin, encoded by ``encode``; the reply is one line on stdout, the marker, a space and a
JSON object shaped like `python_runner`'s replies to ``call``:

- ``{"ok": true, "value": <encoded>}``
- ``{"ok": false, "kind": "load_error" | "missing_function" | "raised", "error": "Type: message"}``

and ``"output"``, the tail of what the program printed. The program runs as the module
``solution`` (as it does locally), with an empty stdin and its prints captured apart from the
reply, so ordinary prints never mix with it. The expected value never comes here: it is compared
on the trusted side, which is why a program that forges a reply gains nothing it could not earn.
"""

import io
import json
import sys
import types

_TAIL_CHARS = 500


def _error_text(error):
    try:
        message = str(error)
    except Exception:  # noqa: BLE001 - an exception that cannot describe itself
        message = ""
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text[:_TAIL_CHARS]


def _function(namespace, name):
    """A top-level function, or a method of a ``Solution`` class (as `python_runner` finds it)."""
    function = namespace.get(name)
    if callable(function) and not isinstance(function, type):
        return function
    solution = namespace.get("Solution")
    if isinstance(solution, type) and callable(getattr(solution, name, None)):
        return getattr(solution(), name)
    return None


def _call(source, name, request, encode, decode):
    module = types.ModuleType("solution")
    sys.modules["solution"] = module
    try:
        exec(compile(source, "<solution>", "exec"), module.__dict__)
    except BaseException as error:  # noqa: BLE001 - a SystemExit from the program too
        return {"ok": False, "kind": "load_error", "error": _error_text(error)}
    function = _function(module.__dict__, name)
    if function is None:
        return {"ok": False, "kind": "missing_function", "error": f"no function named {name!r}"}
    try:
        result = function(*decode(request["args"]), **decode(request["kwargs"]))
        return {"ok": True, "value": encode(result)}
    except BaseException as error:  # noqa: BLE001 - whatever the program raised is its reply
        return {"ok": False, "kind": "raised", "error": _error_text(error)}


def _serve(source, name, marker, encode, decode):
    request = json.loads(sys.stdin.read())
    sys.stdin = io.StringIO("")
    reply_stream, captured = sys.stdout, io.StringIO()
    sys.stdout = captured
    sys.set_int_max_str_digits(0)
    try:
        reply = _call(source, name, request, encode, decode)
    finally:
        sys.stdout = reply_stream
    reply["output"] = captured.getvalue()[-_TAIL_CHARS:]
    reply_stream.write("\n" + marker + " " + json.dumps(reply) + "\n")
    reply_stream.flush()
