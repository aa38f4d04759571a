"""Lower layers never import upper ones, not even inside a function: the migrations are handed an
engine and import no store; the stores import the migrations; the core's types and rules never
import its loop; beat and the worker import neither each other nor a face; and no import cycle
runs through the package, counting the package ``__init__`` that importing a submodule runs, nor
through the imports only type checkers read.

Some arrows are followed to the end (what a module loads, however indirectly): reading the
configuration loads no beat code; no store loads the core's loop; the core's types load none of
its rules; and a face reaches the store's internals only through the store's own modules."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterator
from pathlib import Path

import goatbeat_celery

PACKAGE = Path(goatbeat_celery.__file__).parent


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package under its own name)."""
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:``, which never runs."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, ast.If) and ast.unparse(node.test) in {
                "TYPE_CHECKING", "typing.TYPE_CHECKING"}:
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))


def imported(module: str, path: Path, modules: dict[str, Path], *,
             type_level: bool = False) -> Iterator[str]:
    """The package's modules that ``module`` imports anywhere in it (inside functions too; with
    ``type_level``, under ``if TYPE_CHECKING:`` too).

    ``from a import b`` names module ``a.b`` when there is one, else ``a``; ``import a.b.c``
    names the deepest module that exists. Importing ``a.b.c`` also runs ``a/__init__`` and
    ``a/b/__init__``, so those packages count as imported too, except the ones ``module`` lies
    in: their ``__init__`` ran before ``module`` did."""
    own_packages = {".".join(module.split(".")[:end]) for end in range(1, module.count(".") + 2)}
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree) if type_level else runtime_nodes(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")
                if path.name != "__init__.py":
                    package.pop()
                package = package[:len(package) - (node.level - 1)]
                base = ".".join([*package, *([node.module] if node.module else [])])
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                     for alias in node.names]
        else:
            continue
        for name in names:
            while name not in modules and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in modules and name != module:
                yield name
            parts = name.split(".")
            for end in range(1, len(parts)):
                package = ".".join(parts[:end])
                if package in modules and package not in own_packages:
                    yield package


def import_graph(*, type_level: bool = False) -> dict[str, set[str]]:
    """Each module's imports (a copy: a test may change what it is given)."""
    return {name: set(targets) for name, targets in _read_graph(type_level).items()}


@functools.cache
def _read_graph(type_level: bool) -> dict[str, frozenset[str]]:
    # Read once per process: parsing the package is most of what these tests cost.
    modules = module_files()
    return {name: frozenset(imported(name, path, modules, type_level=type_level))
            for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or not (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group: list[str] = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_reader_sees_imports_inside_functions() -> None:
    graph = import_graph()

    # open_store imports its backends when asked for one.
    assert "goatbeat_celery.store.postgres" in graph["goatbeat_celery.store"]


def test_the_graph_reader_skips_imports_only_type_checkers_read() -> None:
    graph = import_graph()
    typed = import_graph(type_level=True)

    # The run policies name an execution in annotations only.
    policies = "goatbeat_celery.core.rules.policies"
    assert "goatbeat_celery.core.types.execution" not in graph[policies]
    assert "goatbeat_celery.core.types.execution" in typed[policies]
    assert "goatbeat_celery.core.rules.validation" in graph[policies]


def test_the_cycle_finder_finds_a_cycle_through_a_deferred_import() -> None:
    graph = {"store": {"migrations"}, "migrations": {"store.url"}, "store.url": {"store"}}

    assert cycles(graph) == [["migrations", "store", "store.url"]]


def test_importing_a_submodule_counts_its_package_init() -> None:
    graph = import_graph()

    # The web dashboard's app imports the display code; the CLI's web command imports the web
    # package's server, which runs the web package's __init__ first.
    assert "goatbeat_celery.display" in graph["goatbeat_celery.web.app"]
    assert {"goatbeat_celery.web", "goatbeat_celery.web.server"} <= (
        graph["goatbeat_celery.cli.dashboard"])
    # Inside the cli package, importing a sibling runs no __init__ that had not already run.
    assert "goatbeat_celery.cli" not in graph["goatbeat_celery.cli.dashboard"]


def test_the_migrations_import_nothing_of_the_package_but_the_core() -> None:
    graph = import_graph()
    outside = {
        (name, target)
        for name, targets in graph.items() if name.startswith("goatbeat_celery.migrations")
        for target in targets
        if not target.startswith(("goatbeat_celery.migrations", "goatbeat_celery.core"))
    }

    assert outside == set()


def test_no_import_cycle_runs_through_the_stores_or_the_migrations() -> None:
    layers = ("goatbeat_celery.store", "goatbeat_celery.migrations")

    assert [group for group in cycles(import_graph())
            if any(name.startswith(layers) for name in group)] == []


def test_no_import_cycle_runs_through_the_package() -> None:
    assert cycles(import_graph()) == []


def test_no_import_cycle_runs_through_the_package_even_in_annotations() -> None:
    assert cycles(import_graph(type_level=True)) == []


def importers(graph: dict[str, set[str]], lower: tuple[str, ...],
              upper: tuple[str, ...]) -> set[tuple[str, str]]:
    """The imports from a module under ``lower`` to one under ``upper``."""
    return {(name, target) for name, targets in graph.items() if name.startswith(lower)
            for target in targets if target.startswith(upper)}


def test_the_core_types_and_rules_never_import_its_loop() -> None:
    core = "goatbeat_celery.core."
    lower = (core + "types", core + "rules")
    upper = (core + "loop", core + "protocols")

    assert importers(import_graph(type_level=True), lower, upper) == set()


def test_beat_and_the_worker_import_neither_each_other_nor_a_face() -> None:
    faces = ("goatbeat_celery.cli", "goatbeat_celery.web", "goatbeat_celery.contrib")
    beat, worker = ("goatbeat_celery.beat",), ("goatbeat_celery.worker",)
    graph = import_graph(type_level=True)

    assert importers(graph, beat, worker + faces) == set()
    assert importers(graph, worker, beat + faces) == set()


def test_nothing_outside_the_django_app_imports_it() -> None:
    graph = import_graph()
    app = "goatbeat_celery.contrib"
    importers = {name for name, targets in graph.items() if not name.startswith(app)
                 and any(target.startswith(app) for target in targets)}

    assert importers == set()


def reached(graph: dict[str, set[str]], start: str, *,
            through: Callable[[str], bool] = lambda name: True) -> dict[str, list[str]]:
    """Every module ``start`` imports, directly or not, each with a chain of imports from
    ``start`` to it; the walk goes on past only the modules ``through`` accepts."""
    chains = {start: [start]}
    pending = [start]
    while pending:
        name = pending.pop()
        for target in sorted(graph[name]):
            if target not in chains:
                chains[target] = [*chains[name], target]
                if through(target):
                    pending.append(target)
    del chains[start]
    return chains


def reached_under(graph: dict[str, set[str]], lower: tuple[str, ...], upper: tuple[str, ...]
                  ) -> dict[str, list[str]]:
    """The modules under ``upper`` that some module under ``lower`` loads, each with a chain
    that shows how."""
    found: dict[str, list[str]] = {}
    for name in sorted(graph):
        if name.startswith(lower):
            for target, chain in reached(graph, name).items():
                if target.startswith(upper):
                    found.setdefault(target, chain)
    return found


def test_the_walk_follows_imports_through_other_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a"}}

    assert reached(graph, "a") == {"b": ["a", "b"], "c": ["a", "b", "c"]}
    assert reached(graph, "d", through=lambda name: name != "a") == {"a": ["d", "a"]}
    assert reached_under(graph, ("d",), ("c",)) == {"c": ["d", "a", "b", "c"]}


#: Where the configuration is read: every process loads these, beat or not.
CONFIGURATION = ("goatbeat_celery.config", "goatbeat_celery.settings")


def test_reading_the_configuration_loads_no_beat_code() -> None:
    # A tracking worker, the CLI and the dashboard read the configuration too.
    graph = import_graph()

    assert reached_under(graph, CONFIGURATION, ("goatbeat_celery.beat",)) == {}


def test_no_store_loads_the_core_loop() -> None:
    # The stores apply the core's rules; the loop that drives them sits above.
    graph = import_graph(type_level=True)

    assert reached_under(graph, ("goatbeat_celery.store",), ("goatbeat_celery.core.loop",)) == {}


def test_the_core_types_load_none_of_its_rules() -> None:
    graph = import_graph(type_level=True)
    core = "goatbeat_celery.core."

    assert reached_under(graph, (core + "types",), (core + "rules",)) == {}


FACES = ("goatbeat_celery.web", "goatbeat_celery.cli", "goatbeat_celery.display",
         "goatbeat_celery.contrib")
#: The store's internals: its backends and its SQL schema. Its other modules (the package and
#: ``url``, ``migrate``, ``privileges``, ``errors``...) are what the rest of the package uses.
STORE_INTERNALS = ("goatbeat_celery.store.sql", "goatbeat_celery.store.memory",
                   "goatbeat_celery.store.postgres", "goatbeat_celery.store.sqlite",
                   "goatbeat_celery.store.schema")
#: The imports of a store internal that a face still reaches other than through the store's
#: own modules. This list only shrinks: an import named here may go, none may be added.
FACE_STORE_EXCEPTIONS = {
    # The Django app maps the schema's tables to models and the admin reads their columns.
    ("goatbeat_celery.contrib.django.admin", "goatbeat_celery.store.schema"),
    ("goatbeat_celery.contrib.django.models", "goatbeat_celery.store.schema"),
    # Django's transaction is handed to the PostgreSQL store directly.
    ("goatbeat_celery.contrib.django.transactions", "goatbeat_celery.store.postgres"),
    ("goatbeat_celery.contrib.django.transactions", "goatbeat_celery.store.postgres.loaders"),
    # Reached through the package root, which faces import and which exports track_runs.
    ("goatbeat_celery.worker.tracking.signals", "goatbeat_celery.store.postgres"),
    ("goatbeat_celery.worker.tracking.signals", "goatbeat_celery.store.sqlite"),
}


def face_store_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The imports of a store internal met on the way from a face, walking past every module
    but the store's own: those are the store's business."""
    def outside_the_store(name: str) -> bool:
        return not name.startswith("goatbeat_celery.store")

    found: set[tuple[str, str]] = set()
    for face in sorted(name for name in graph if name.startswith(FACES)):
        for target, chain in reached(graph, face, through=outside_the_store).items():
            if target.startswith(STORE_INTERNALS):
                found.add((chain[-2], target))
    return found


def test_faces_reach_the_store_internals_only_through_the_store() -> None:
    graph = import_graph(type_level=True)

    assert face_store_imports(graph) <= FACE_STORE_EXCEPTIONS


def test_the_faces_store_exceptions_are_all_still_needed() -> None:
    # An exception that no longer holds is taken off the list, so it cannot come back unseen.
    assert face_store_imports(import_graph(type_level=True)) == FACE_STORE_EXCEPTIONS


#: The faces: they read and write through Schedules, never its store.
FACE_DIRECTORIES = ("web", "cli", "contrib", "display")
#: Faces that open a store of their own, to check the store itself (``check``, ``health``).
STORE_CHECKERS = frozenset({"cli/access.py", "cli/checks.py"})


def store_protocols() -> set[str]:
    """The names of the store's protocols: its concerns' (``goatbeat_celery.core.protocols``)
    and the whole store's (``goatbeat_celery.store.Store``)."""
    names = set()
    for path in [*(PACKAGE / "core" / "protocols").rglob("*.py"),
                 *(PACKAGE / "store").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(base).endswith("Protocol") for base in node.bases):
                names.add(node.name)
    return names


def store_reaches(source: str, protocols: set[str]) -> list[str]:
    """Where ``source`` reaches past an object into its store: an attribute named ``store``
    (``schedules.store``, ``getattr(x, "store")``), or a ``cast`` to a store protocol."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr == "store"
                and ast.unparse(node.value) != "goatbeat_celery"):  # the module, not a store
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and node.args:
            called = ast.unparse(node.func)
            first = node.args[0]
            if (called == "getattr" and len(node.args) > 1
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value == "store"):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
            elif called.split(".")[-1] == "cast":
                target = (first.value if isinstance(first, ast.Constant)
                          else ast.unparse(first).split(".")[-1])
                if target in protocols:
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_face_reaches_past_schedules_into_its_store() -> None:
    protocols = store_protocols()
    assert {"LeaseManager", "ScheduleStore", "Store", "AlertLog"} <= protocols
    # The scan finds each form of reach, so an empty answer below means none is there.
    sample = ("now = schedules.store.now()\n"
              "rows = cast(LeaseManager, leases).list_leases('')\n"
              "alerts = typing.cast('AlertLog', x)\n"
              "other = getattr(schedules, 'store')\n"
              "from goatbeat_celery.store import open_store\n"
              "url = goatbeat_celery.store.url\n"
              "text = cast(str, token)\n")
    assert {int(reach.split(":")[0]) for reach in store_reaches(sample, protocols)} == {
        1, 2, 3, 4}
    assert {path for path in STORE_CHECKERS if (PACKAGE / path).is_file()} == STORE_CHECKERS

    reaching = {
        f"{relative}:{reach}"
        for face in FACE_DIRECTORIES for path in sorted((PACKAGE / face).rglob("*.py"))
        if (relative := path.relative_to(PACKAGE).as_posix()) not in STORE_CHECKERS
        for reach in store_reaches(path.read_text(encoding="utf-8"), protocols)
    }

    assert reaching == set()
