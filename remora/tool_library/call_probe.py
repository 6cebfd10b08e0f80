"""The call probe: runs candidate calls of one function or method and says what each did.

This file is not imported by Remora: `explore_calls` (tool_library/characterize.py) copies it
into a command's throwaway folder and runs it with the project's Python inside the OS sandbox,
`python call_probe.py REQUEST RESULT`. So it uses the standard library only, plus coverage.py
when the project's Python has it (branch arcs; without it the selection falls back to distinct
outcomes), and it must run on any Python 3 that runs the project.

Each call runs in a forked child of a process that has imported the module, so no call sees
what an earlier one changed and a call that hangs or kills its process is only that call's
outcome. The child records: what the call returned (its repr, and whether that repr reads back
as an equal literal) or raised (type, message, the line of the module it was raised from and
whether that line is a `raise` statement), the branch arcs it covered within the target's lines,
the module- and class-level state it changed (attributes, and mutable defaults of functions),
the arguments it mutated, and for methods the instance's public attributes afterwards. The
calls' text was checked by the host's allow-list (test_cases.parse_test_case: literals,
constructors of the module's classes and of standard value types through their module,
`datetime.date(...)`) before it got here.
"""

import ast
import collections.abc
import contextlib
import gc
import importlib
import inspect
import io
import itertools
import json
import os
import re
import select
import signal
import sys
import time

CALL_SECONDS = 2
"""How long one call may run before it counts as hanging (not pinned)."""
REPR_LIMIT = 2000
TEXT_LIMIT = 1500
"""A returned text of several lines (a table drawn, a report) is pinned up to this length, and
written line by line; any other value only up to 300 characters."""
GENERATED_ITEMS = 50
"""Items of a returned generator listed; more, and its items are not pinned."""


class CallTimeout(BaseException):
    """Raised in the child by SIGALRM: BaseException, so the call's own handlers miss it."""


def main(request_path, result_path):
    with open(request_path, encoding="utf-8") as handle:
        request = json.load(handle)
    sys.path.insert(0, os.path.abspath(request["import_root"] or "."))
    module = importlib.import_module(request["module"])
    path = os.path.realpath(module.__file__)
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    request["clocked"] = any(CLOCK_CALL.search(line) for line in lines)
    request["lazy"] = sorted(lazy_globals("\n".join(lines)))
    try:
        import coverage  # noqa: F401 (only whether it is there)

        has_coverage = True
    except ImportError:
        has_coverage = False
    tracer = started_once(path) if has_coverage else None
    # Every object so far is the parent's: frozen, a child's collections never visit them, so
    # they do not copy the pages the parent's objects are on (a tenth of a probe's CPU time:
    # 335 -> 301 ms for 22 calls of rich.color, measured with perf stat).
    gc.freeze()
    results = [
        in_child(module, path, lines, request, call, has_coverage, tracer)
        for call in request["calls"]
    ]
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump({"coverage": has_coverage, "results": results}, handle)


def started_once(path):
    """A coverage.py tracer for the module's file, started and stopped once before any fork:
    coverage.py's first-start setup (most of a call's time) is made once per probe, and each
    child starts its copy, which holds no data (nothing ran meanwhile). None when it fails."""
    import coverage

    try:
        tracer = coverage.Coverage(branch=True, data_file=None, include=[path], config_file=False)
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            tracer.start()
            tracer.stop()
    except Exception:
        return None
    return tracer


def in_child(module, path, lines, request, call, has_coverage, tracer=None):
    """One call in a forked child; its observation, or what became of the child."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: observe, report through the pipe, never return
        os.close(read_end)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            filler = displaced()  # kept alive through the call
            seen = observe(module, path, lines, request, call, has_coverage, tracer)
            del filler
        except BaseException as error:  # anything is the call's outcome
            seen = {"outcome": "crashed", "problem": type(error).__name__}
        data = json.dumps(seen, default=str).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view) :]
        os._exit(0)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + CALL_SECONDS + 3
    while True:
        left = deadline - time.monotonic()
        ready = select.select([read_end], [], [], max(left, 0))[0] if left > 0 else []
        if not ready:
            os.kill(pid, signal.SIGKILL)
            break
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks).decode())
    except ValueError:
        return {"outcome": "crashed", "problem": "the call ended its process"}


class Filler:
    """An object with attributes, the size of a module's instance."""


def displaced():
    """Objects allocated before the call, as many as this child's process id says, so that
    what the call allocates lands elsewhere than in the other run's child: objects hashed by
    identity (a set of instances) then come out in another order, and the call is dropped as
    behaving differently from run to run (mnemonic's `detect_language('big')` raised
    'ambiguous between portuguese, italian' in both runs, and 'italian, portuguese' in one
    order of the suite)."""
    filler = []
    for index in range(os.getpid() % 29):
        item = Filler()
        item.index = index
        filler.append(item)
    return filler


def observe(module, path, lines, request, call, has_coverage, tracer=None):
    # The allow-list admits slice(ints), bytearray(bytes or ints), memoryview(bytes).
    namespace = {"__builtins__": {}, "slice": slice, "bytearray": bytearray}
    namespace["memoryview"] = memoryview
    namespace.update(PASSED_BUILTINS)  # `str`, given to a callable parameter
    # Its classes (constructed) and functions (passed by name): whatever a decorator made of
    # a `def` (parsy's `@Parser def eof`, an `lru_cache`), the allow-list checked the name.
    namespace.update(
        {name: f for name, f in vars(module).items() if callable(f) and "." not in name}
    )
    for package in ARGUMENT_MODULES:  # `datetime.date(...)`: where the module defines no such name
        if getattr(namespace.get(package), "__module__", None) != module.__name__:
            namespace[package] = importlib.import_module(package)
    before = state(module)
    unset = {name for name, value in vars(module).items() if value is None}
    tables = {  # module-level dicts and lists, and a copy of what they held
        name: (value, type(value)(value))
        for name, value in vars(module).items()
        if type(value) in (dict, list)
    }
    instance = None
    namespace["_split"] = lambda *args, **kwargs: (args, kwargs)
    if call.get("instance"):
        try:
            instance = instance_of(call, namespace)
        except Exception as error:
            return {"outcome": "setup_failed", "exception": type(error).__name__}
        function = getattr(instance, request["method"])
        built = public_state(instance)
    else:
        function = getattr(module, request["function"])
    args, kwargs = eval("_split(" + call["arguments"] + ")", namespace)
    arguments = {}
    sample = None
    try:
        signature = inspect.signature(function)
        bound = signature.bind(*args, **kwargs)
        arguments = dict(bound.arguments)
        sample = as_sample(arguments, signature)
    except (TypeError, ValueError):
        pass
    files = files_state()
    mutable = {
        name: (value, safe_repr(value))
        for name, value in arguments.items()
        if isinstance(value, (list, dict, set, bytearray))
    }
    if has_coverage and tracer is None:
        import coverage

        tracer = coverage.Coverage(branch=True, data_file=None, include=[path], config_file=False)
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(CALL_SECONDS)
    seen = {}
    consumed = False
    drawn = watched_randomness()
    if request.get("clocked"):  # only then: a profile hook slows every call
        sys.setprofile(clock_watch(drawn))
    try:
        if tracer is not None:
            tracer.start()
        try:
            drawn["on"] = True  # only the call's own draws: coverage.py draws some too
            value = followed(function, args, kwargs, call, namespace)
            iterated = request.get("method") in ("__iter__", "__reversed__")
            consumed = inspect.isgenerator(value) or (iterated and hasattr(value, "__next__"))
            # A mapping's keys(), values() and items() (dict_keys, ItemsView): what they hold,
            # in the mapping's order, is their behaviour; their repr reads back as nothing.
            consumed = consumed or isinstance(value, collections.abc.MappingView)
            # So do the iterators of the builtins and itertools a function returns (`zip`,
            # `map`, `chain`): toolz's `concat`, `cons` and `partition` pinned nothing.
            standard = type(value).__module__ in ("builtins", "itertools")
            consumed = consumed or (standard and hasattr(value, "__next__"))
            if consumed:  # a generator's behaviour is what it yields: a test lists it
                value = list(itertools.islice(value, GENERATED_ITEMS + 1))
        finally:
            drawn["on"] = False
            sys.setprofile(None)
            if tracer is not None:
                tracer.stop()
        seen = {"outcome": "returned"} | described(value, module)
        if consumed:
            seen["generator"] = True
            if len(value) > GENERATED_ITEMS:
                seen["value"] = None  # endless or long: nothing a literal can hold
    except CallTimeout:
        return {"outcome": "timeout"}
    except NotMade as error:  # the call itself raised: the call without `then` says so
        return {"outcome": "setup_failed", "exception": error.args[0]}
    except Exception as error:
        seen = {
            "generator": consumed,  # raised while listing what it yields: a test lists it too
            "outcome": "raised",
            "exception": type(error).__name__,
            "exception_module": type(error).__module__,
            "exception_bases": [
                base.__name__ for base in type(error).__mro__ if base.__module__ == "builtins"
            ],
            "message": str(error)[:300],
        }
        site = None
        for frame, line in traceback_lines(error.__traceback__):
            if os.path.realpath(frame) == path:
                site = line
        seen["site"] = site
        text = lines[site - 1].strip() if site and site <= len(lines) else ""
        seen["site_is_raise"] = text.startswith("raise")
        seen["site_unpacks_name"] = isinstance(error, ValueError) and unpacks_name(text)
    finally:
        signal.alarm(0)
    if tracer is not None:
        spans = request["lines"]  # the target's, then the private functions it calls
        arcs = tracer.get_data().arcs(path) or []
        seen["arcs"] = sorted(
            [a, b]
            for a, b in arcs
            if any(first <= abs(a) <= last or first <= abs(b) <= last for first, last in spans)
        )
    after = files_state()  # once: a walk of the folder per file made a call cost seconds
    seen["files_changed"] = sorted(
        name for name, stamp in after.items() if files.get(name) != stamp
    ) + sorted(name for name in files if name not in after)
    seen["state_changed"] = sorted(
        key for key, text in state(module).items() if before.get(key) != text
    )
    if instance is not None:  # what the call changed in the instance (or added to it)
        after = public_state(instance)
        seen["instance"] = {name: text for name, text in after.items() if built.get(name) != text}
    # Built once on first use (`if _pattern is None: _pattern = re.compile(...)`), here too
    # for a method: the call made again on its instance shows it changes no result.
    lazy = [
        name
        for name in seen["state_changed"]
        if name in request.get("lazy", ()) and name in unset and vars(module).get(name) is not None
    ]
    caches = memo_caches(module, tables, seen["state_changed"], lazy)
    on_function = instance is None or set(caches) <= set(lazy)
    if caches and on_function and same_again(module, function, call, namespace, seen):
        seen["caches"] = caches
        seen["state_changed"] = [key for key in seen["state_changed"] if key not in caches]
    # Class attributes the call sets (docopt's `DocoptExit.usage = printable_usage(doc)`), and
    # nothing else, where the call made again returns the same: a test puts them back after
    # itself (pytest's monkeypatch), so no other test sees them.
    changed = seen["state_changed"]
    restorable = changed and all(class_attribute(module, key) for key in changed)
    if restorable and instance is None and same_again(module, function, call, namespace, seen):
        seen["restored"], seen["state_changed"] = changed, []
    seen["mutated"] = {
        name: literal(value) for name, (value, text) in mutable.items() if safe_repr(value) != text
    }
    # A call that drew random numbers (random, secrets, uuid4: os.urandom) returns what the
    # draw gave: the two probe runs are two draws, and one of few words passes both by chance.
    # So does one that read the clock: `human(3)` is '56 years, 347 days ago' for a day.
    seen["varies"] = drawn["count"] > 0
    quiet = not (seen["state_changed"] or seen["files_changed"] or seen["mutated"])
    if instance is None and quiet and not consumed and not seen["varies"]:
        # Another draw of anything else that varies (the clock): the call made again.
        seen["varies"] = not same_again(module, function, call, namespace, seen, False)
    seen["sample"] = sample
    return seen


def watched_randomness():
    """{"on", "count"}: while "on", each random number this process draws is counted: the
    random module's generators (its functions, Random and SystemRandom instances) and
    os.urandom (secrets, uuid4) are wrapped. The child is forked: nothing else sees this."""
    import random

    drawn = {"on": False, "count": 0}

    def watched(original):
        def draw(*args, **kwargs):
            drawn["count"] += int(drawn["on"])
            return original(*args, **kwargs)

        return draw

    for owner in (random.Random, random.SystemRandom, random):
        for name in ("random", "getrandbits"):
            if hasattr(owner, name):
                setattr(owner, name, watched(getattr(owner, name)))
    os.urandom = watched(os.urandom)
    return drawn


CLOCK_CALL = re.compile(r"\b(now|utcnow|today|time|time_ns)\s*\(")
"""A module that may read the clock: `datetime.now()`, `date.today()`, `time.time()`."""


def clock_watch(drawn):
    """A profile hook (sys.setprofile) that counts, while `drawn["on"]`, the calls that read
    the clock: datetime's and date's `now`, `utcnow` and `today` (a subclass's too), and
    time's `time` and `time_ns`. They are C functions: no wrapper catches `datetime.now()`,
    whatever name the module imported it under."""
    import datetime

    def profile(frame, event, arg):
        if event != "c_call" or not drawn["on"]:
            return
        owner = getattr(arg, "__self__", None)
        name = getattr(arg, "__name__", "")
        if isinstance(owner, type) and issubclass(owner, datetime.date):
            drawn["count"] += name in ("now", "utcnow", "today")
        elif getattr(arg, "__module__", None) == "time":
            drawn["count"] += name in ("time", "time_ns")

    return profile


def class_attribute(module, key):
    """Whether a key of `state` names a data attribute of one of the module's classes."""
    owner, _, attribute = key.partition(".")
    return bool(attribute) and not key.endswith("()") and inspect.isclass(vars(module).get(owner))


def memo_caches(module, tables, changed, lazy=()):
    """The changed names that are module-level dicts or lists the call only added entries to
    (the same object, every earlier key or item still there, the same object), or `lazy`
    globals it built: a memo cache, such as a parser's compiled patterns, if filling it changes
    nothing a later call returns."""
    found = []
    for name in changed:
        if name in lazy:
            found.append(name)
            continue
        value, copy = tables.get(name, (None, None))
        if value is None or vars(module).get(name) is not value or len(value) <= len(copy):
            return []
        if isinstance(copy, dict) and any(key not in value for key in copy):
            return []  # a list that grew holds every earlier index
        pairs = copy.items() if isinstance(copy, dict) else enumerate(copy)
        if any(value[key] is not old for key, old in pairs):
            return []
        found.append(name)
    return found


def lazy_globals(text):
    """The module's names that functions assign (declared `global`) only under a test that the
    name is unset, `if _pattern is None:` or `if not _pattern:`: a value built on first use,
    after which every call reads the same one."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    guarded, unguarded = set(), set()

    def visit(node, declared, guards):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            declared = {n for inner in ast.walk(node) if isinstance(inner, ast.Global)
                        for n in inner.names}  # fmt: skip
            guards = frozenset()
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in declared:
                    (guarded if target.id in guards else unguarded).add(target.id)
        if isinstance(node, ast.If):
            test = node.test
            name = ""
            if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name):
                none = isinstance(test.comparators[0], ast.Constant)
                none = none and test.comparators[0].value is None
                if none and isinstance(test.ops[0], ast.Is) and len(test.ops) == 1:
                    name = test.left.id
            elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                name = test.operand.id if isinstance(test.operand, ast.Name) else ""
            visit(test, declared, guards)
            for inner in node.body:
                visit(inner, declared, guards | {name} if name else guards)
            for inner in node.orelse:
                visit(inner, declared, guards)
            return
        for inner in ast.iter_child_nodes(node):
            visit(inner, declared, guards)

    visit(tree, set(), frozenset())
    return guarded - unguarded


def instance_of(call, namespace):
    """The instance a method is called on: its constructor call (allow-listed literals only),
    then the methods called on it first (`tree.add('he')` before `tree.search(...)`), each
    checked by the allow-list as a call of its own."""
    instance = eval(call["instance"], namespace)
    for method, text in call.get("setup") or []:
        step_args, step_kwargs = eval("_split(" + text + ")", namespace)
        getattr(instance, method)(*step_args, **step_kwargs)
    return instance


class NotMade(Exception):
    """The call raised before the method to call on what it returned (`then`) was reached."""


def followed(function, args, kwargs, call, namespace):
    """What the call returned, or where the candidate names a method to call on that (`then`:
    a parser's `parse('abc')` after `string('abc')`), or on the instance after the call
    (`then_on`: a mutator's effect read back), what that method returned; NotMade where the
    call itself raised (the candidate without `then` pins that)."""
    if not call.get("then"):
        return function(*args, **kwargs)
    try:
        made = function(*args, **kwargs)
    except Exception as error:  # not CallTimeout: a BaseException
        raise NotMade(type(error).__name__) from None
    if call.get("then_on") == "instance":
        made = function.__self__
    name, text = call["then"]
    then_args, then_kwargs = eval("_split(" + text + ")", namespace)  # allow-listed literals
    value = getattr(made, name)(*then_args, **then_kwargs)
    if call.get("then_on") == "instance":
        # Read from an instance built the same way without the call: the same value says
        # the call changed nothing this reads, and a test of it would pin the reader alone.
        try:
            fresh = instance_of(call, namespace)
            then_args, then_kwargs = eval("_split(" + text + ")", namespace)
            alone = getattr(fresh, name)(*then_args, **then_kwargs)
            unchanged = type(alone) is type(value) and bool(alone == value)
        except Exception:
            unchanged = False
        if unchanged:
            raise NotMade("nothing it reads changed")
    return value


def same_again(module, function, call, namespace, seen, messages=True):
    """Whether the call, made again now that it filled its caches (the arguments built anew),
    returns or raises the same: the repetition that shows a cache changes no result. The suite
    check on the host runs the written tests in several orders, which shows the rest.
    `messages`: whether an exception's message must be the same too."""
    if seen.get("generator"):
        return False
    signal.alarm(CALL_SECONDS)
    try:
        args, kwargs = eval("_split(" + call["arguments"] + ")", namespace)
        again = followed(function, args, kwargs, call, namespace)
        again = {"outcome": "returned"} | described(again, module)
    except CallTimeout:
        return False
    except Exception as error:
        again = {"outcome": "raised", "exception": type(error).__name__, "message": str(error)}
    finally:
        signal.alarm(0)
    keys = ("outcome", "value", "exception", "attributes")
    message = str(seen.get("message"))[:300] == str(again.get("message"))[:300] or not messages
    return all(seen.get(key) == again.get(key) for key in keys) and message


def alarm(signum, frame):
    raise CallTimeout()


def unpacks_name(text):
    """Whether the line `text` unpacks a plain name into several (`char, xlate = item`, `for a,
    b in pairs:`): a ValueError there ("not enough values to unpack") says the argument's items
    have another shape than the code reads, not what the code does with them."""
    try:
        tree = ast.parse(text + " pass" if text.endswith(":") else text)
    except SyntaxError:
        return False
    node = tree.body[0] if len(tree.body) == 1 else None
    if isinstance(node, ast.For):
        target, value = node.target, node.iter
    elif isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    else:
        return False
    return isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, ast.Name)


def traceback_lines(tb):
    while tb is not None:
        yield tb.tb_frame.f_code.co_filename, tb.tb_lineno
        tb = tb.tb_next


def described(value, module):
    """A returned value: its repr if that reads back equal (a literal, or a value built by a
    standard value type or one of the module's own classes: `constructed`), else its type, and
    for an object of the module's own classes its public state."""
    seen = {"type": type(value).__name__, "value": literal(value)}
    if seen["value"] is None:
        built = constructed(value, module)
        if built is not None:
            seen["value"], seen["value_names"] = built
    if seen["value"] is None and type(value).__module__ == module.__name__:
        seen["attributes"] = public_state(value)
    return seen


VALUE_TYPES = {"datetime": ("date", "datetime", "time", "timedelta", "timezone"),
               "decimal": ("Decimal",), "fractions": ("Fraction",), "uuid": ("UUID",)}  # fmt: skip
"""Standard value types whose repr builds an equal value (case_checks.VALUE_IMPORTS)."""
BUILTIN_VALUES = {"bytearray": bytearray, "frozenset": frozenset}
"""Builtin types whose repr builds an equal value but is no literal: `bytearray(b'\\x01')`."""
ARGUMENT_MODULES = (*VALUE_TYPES, "io")
"""The modules arguments are built through (case_checks.STANDARD_MODULES): value types, and
`io` for streams a reader is given."""


def constructed(value, module):
    """(code, the module's classes it names) for a value its repr builds again: a standard value
    type's (`Decimal('1.5')`), a member of one of the module's enums (`Color.RED`), an object of
    one of the module's classes (a named tuple, an eq dataclass: `Point(x=1, y=2)`), a tuple,
    list, dict or set holding such values; None unless that code, evaluated with only those
    names, gives back an equal value of the same type."""
    import enum

    kind, names = type(value), {"datetime": importlib.import_module("datetime"), **BUILTIN_VALUES}
    for package in ("decimal", "fractions", "uuid"):
        imported = importlib.import_module(package)
        names.update({name: getattr(imported, name) for name in VALUE_TYPES[package]})
    # Its own classes, and those its package's other modules give it (`from .constants import
    # *`): a test imports them from the module under test, by the name it has there.
    package = module.__name__.partition(".")[0] + "."
    own = {name: item for name, item in vars(module).items() if inspect.isclass(item)}
    own = {name: item for name, item in own.items() if (item.__module__ + ".").startswith(package)}
    owned = own.get(kind.__name__) is kind
    if isinstance(value, enum.Enum):
        if not owned or getattr(kind, value.name, None) is not value:
            return None
        text = kind.__name__ + "." + value.name
    else:
        # Any class of the module whose repr builds an equal value (a record, an immutable
        # mapping's `frozendict({'a': 1})`): the evaluation below decides, not its kind.
        standard = kind.__name__ in VALUE_TYPES.get(kind.__module__, ())
        # A container of them too: `(datetime.timedelta(days=1), True)`.
        held = kind in (tuple, list, dict, set) or BUILTIN_VALUES.get(kind.__name__) is kind
        if not owned and not standard and not held:
            return None
        text = safe_repr(value)
    try:
        again = eval(text, {"__builtins__": {}, **names, **own})  # the sandbox's own repr
        if len(text) > 300 or type(again) is not kind or again != value:
            return None
        if again == object():  # an __eq__ that holds for anything: the assertion cannot fail
            return None
    except Exception:
        return None
    used = {node.id for node in ast.walk(ast.parse(text, mode="eval")) if hasattr(node, "id")}
    return text, sorted(name for name in own if name in used)


PASSED_BUILTINS = {"str": str, "len": len}
"""The builtins a callable parameter may be given (standard_values.CALLABLE_BUILTINS; this
script imports nothing of Remora): bound by name in every call's namespace."""


def literal(value):
    """repr(value) when it reads back as an equal value of the same type (a literal a test can
    hold), or of the builtin type it derives from (docopt's `class Dict(dict)`, whose repr is a
    dict's: a test compares it with the dict), else None. A PASSED_BUILTINS function is written
    by its name, alone or in a list, tuple, set or dict (`[(str, 'a')]`)."""
    text = safe_repr(value)
    try:
        again = ast.literal_eval(text)
    except Exception:
        text = named(value)
        if text == safe_repr(value):  # no builtin in it: no literal
            return None
        try:
            again = eval(text, {"__builtins__": {}, **PASSED_BUILTINS})  # names and literals
            if type(again) is not type(value) or again != value:
                return None
        except Exception:
            return None
    try:
        kind = type(again)
        derived = kind in (dict, list, tuple, set, str, int, bytes) and isinstance(value, kind)
        same = (kind is type(value) or derived) and again == value
    except Exception:
        same = False
    limit = TEXT_LIMIT if isinstance(value, str) and "\n" in value else 300
    return text if same and len(text) <= limit else None


def named(value, depth=0):
    """repr(value) with the PASSED_BUILTINS in it written by name."""
    for name, function in PASSED_BUILTINS.items():
        if value is function:
            return name
    if depth > 8:
        return safe_repr(value)
    if type(value) in (list, set) and value:
        inner = ", ".join(named(item, depth + 1) for item in value)
        return f"[{inner}]" if type(value) is list else "{" + inner + "}"
    if type(value) is tuple:
        inner = ", ".join(named(item, depth + 1) for item in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if type(value) is dict:
        pairs = (f"{named(k, depth + 1)}: {named(v, depth + 1)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    return safe_repr(value)


def public_state(instance):
    """The instance's public attributes whose values read back as literals; for a dict, list or
    set of a class of the module's, first what it holds, under "==" (the test compares the
    instance itself: `assert d == {'a': 1}`)."""
    found = {}
    if isinstance(instance, (dict, list, set)):
        text = literal(instance)
        if text is not None:
            found["=="] = text  # case_checks.CONTENTS (this script imports nothing of Remora)
    try:
        items = sorted(vars(instance).items())
    except TypeError:
        return found
    for name, value in items:
        if not name.startswith("_"):
            text = literal(value)
            if text is not None:
                found[name] = text
    return found


def state(module):
    """What other tests could see change: the module's data attributes, its classes' data
    attributes and the defaults of its functions and methods (a mutable default is state)."""
    found = {}
    for name, value in list(vars(module).items()):
        if name.startswith("__") or inspect.ismodule(value):
            continue
        if inspect.isclass(value):
            if value.__module__ != module.__name__:
                continue
            for attribute, member in list(vars(value).items()):
                if attribute.startswith("__") and attribute != "__init__":
                    continue
                function = getattr(member, "__func__", member)
                if inspect.isfunction(function):
                    found[name + "." + attribute + "()"] = defaults(function)
                elif not isinstance(member, property) and not callable(member):
                    found[name + "." + attribute] = safe_repr(member)
        elif inspect.isfunction(value):
            found[name + "()"] = defaults(value)
        elif not callable(value):
            found[name] = safe_repr(value)
    return found


def defaults(function):
    return safe_repr((function.__defaults__, function.__kwdefaults__))


def safe_repr(value):
    try:
        return repr(value)[:REPR_LIMIT]
    except Exception as error:
        return "<repr failed: " + type(error).__name__ + ">"


def as_sample(arguments, signature):
    """The bound arguments as a JSON object, as a fixture holds them: tuples and sets as lists,
    `*args` as a list, `**kwargs` merged at the top level; None when a value has no JSON form."""
    sample = {}
    for name, value in arguments.items():
        kind = signature.parameters[name].kind
        if kind == inspect.Parameter.VAR_KEYWORD:
            sample.update(value)
        else:
            sample[name] = value
    try:
        text = json.dumps(sample, default=listed)
    except (TypeError, ValueError):
        return None
    return json.loads(text)


def listed(value):
    if isinstance(value, (tuple, set, frozenset)):
        return sorted(value, key=repr) if isinstance(value, (set, frozenset)) else list(value)
    raise TypeError(type(value).__name__)


SKIPPED_NAMES = (".remora_probe.json", ".remora_probe_result.json", ".remora_call_probe.py")


def files_state():
    """Every file under the working folder (the project's copy for this command) with its size
    and modification time: a call that writes or deletes one would do it to the user's project
    when the test runs there. Symbolic links (the rest of the project, read-only) are not
    followed."""
    found = {}
    for folder, folders, names in os.walk("."):
        folders[:] = [name for name in folders if name != "__pycache__"]
        for name in names:
            if name in SKIPPED_NAMES:
                continue
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            found[path[2:]] = (info.st_size, info.st_mtime_ns)
    return found


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
