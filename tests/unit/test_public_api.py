"""The public surface is explicit, sorted and derived from the module itself."""

import subprocess
import sys
import types

import pytest

import redrive
from redrive import errors


def test_all_is_every_public_name_the_package_defines_and_is_sorted() -> None:
    # Derived, not copied (httpx's test): a name imported into redrive but left
    # out of __all__, or listed but missing, fails here.
    defined = {
        name for name, value in vars(redrive).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
        and name not in ("TYPE_CHECKING", "Any", "import_module")
    }
    assert set(redrive.__all__) == defined | set(redrive._LAZY)
    assert redrive.__all__ == sorted(redrive.__all__)
    assert len(redrive.__all__) == len(set(redrive.__all__))
    for name in redrive.__all__:
        assert getattr(redrive, name) is not None


def test_importing_redrive_loads_no_database_driver() -> None:
    # A fresh interpreter: this one already imported psycopg for other tests.
    code = ("import redrive, sys; assert 'psycopg' not in sys.modules, 'psycopg loaded'; "
            "redrive.SQLiteStore; assert 'psycopg' not in sys.modules; "
            "redrive.PostgresStore; assert 'psycopg' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_importing_redrive_or_building_the_cli_reads_no_package_metadata() -> None:
    # importlib.metadata (and what it loads) was a tenth of `import redrive`:
    # the version is read when a worker registers or --version asks.
    code = ("import sys, redrive, redrive.cli; redrive.cli._parser(); "
            "assert 'importlib.metadata' not in sys.modules, 'importlib.metadata loaded'; "
            "from redrive.runtime.presence import installed_version; "
            "assert installed_version() not in ('', 'unknown'); assert 'importlib.metadata' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_every_error_is_a_redrive_error_with_a_code_and_a_drawn_place_in_the_tree() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.RedriveError)
        assert cls.code.isupper()
        assert name in errors.__doc__, f"{name} is missing from the drawn tree"
        assert str(cls()) == cls.__doc__.strip().splitlines()[0]
    assert set(errors.__all__) <= set(redrive.__all__)


def test_what_a_worker_retries_is_not_what_a_job_state_refuses() -> None:
    # The worker retries StoreError as transient; a refused transition or a
    # lost lease must never look like one.
    for cls in (errors.IllegalTransition, errors.LeaseLost):
        assert issubclass(cls, errors.JobStateError)
        assert not issubclass(cls, errors.StoreError)


def test_transient_and_permanent_take_the_same_arguments() -> None:
    retry = errors.Transient("rate limited", code="RATE_LIMITED")
    fail = errors.Permanent("that address cannot receive mail", code="INVALID_RECIPIENT")
    assert (retry.message, retry.code) == ("rate limited", "RATE_LIMITED")
    assert (fail.message, fail.code) == ("that address cannot receive mail", "INVALID_RECIPIENT")


def test_the_event_catalogue_is_documented_as_it_is() -> None:
    from pathlib import Path

    from redrive.events import CATALOGUE

    doc = (Path(__file__).resolve().parents[2] / "docs" / "events.md").read_text()
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("``"):
            rows[cells[0].strip("`")] = frozenset(k.strip() for k in cells[2].split(","))
    assert rows == dict(CATALOGUE)


def test_the_conformance_suite_calls_every_store_method() -> None:
    """A method the suite never calls is a method no store is held to."""
    import inspect
    from pathlib import Path

    from redrive.store.reads import Reads

    suite = "".join(p.read_text() for p in (Path(redrive.__file__).parent / "testing" / "suite").glob("*.py"))
    methods = {name for cls in Reads.__mro__ if cls.__module__.startswith("redrive.store")
               for name, value in vars(cls).items() if inspect.isfunction(value) and not name.startswith("_")}
    missing = sorted(name for name in methods - {"close"} if f".{name}(" not in suite)
    assert not missing, f"the conformance suite never calls {missing}"


def test_a_declaration_with_a_bad_mode_is_a_config_error() -> None:
    import pytest

    with pytest.raises(errors.ConfigError, match="mode must be one of hold, fail_fast, not 'bogus'"):
        redrive.Dependency("gateway", mode="bogus")  # type: ignore[arg-type]


def test_the_renamed_result_exceptions_keep_their_old_import_paths_with_a_warning() -> None:
    # JobFailed and JobCancelled are the events; the exceptions a result's wait
    # raises became ResultFailed and ResultCancelled, and code that caught the
    # old names still catches the same classes.
    for module in (redrive, errors):
        with pytest.warns(DeprecationWarning, match="JobFailed is now ResultFailed"):
            assert module.JobFailed is errors.ResultFailed
        with pytest.warns(DeprecationWarning, match="JobCancelled is now ResultCancelled"):
            assert module.JobCancelled is errors.ResultCancelled
    assert "JobFailed" not in redrive.__all__ and "JobFailed" not in errors.__all__
