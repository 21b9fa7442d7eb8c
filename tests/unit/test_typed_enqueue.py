"""Enqueue through the task object: the function's own arguments, checked at
enqueue (and by a type checker, since redrive ships py.typed)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta

import pytest

from redrive import App, ArgumentsNotSerializable, ConfigError, MemoryStore, Status, Task

TYPED = '''
from redrive import App

app = App("memory://")

@app.task
def send_welcome(user_id: int, *, locale: str = "en") -> None: ...

send_welcome.enqueue(42, locale="fr")
send_welcome.options(queue="email").enqueue(43)
send_welcome.enqueue("forty-two")
'''


def test_a_task_enqueues_with_its_own_arguments_and_options() -> None:
    app = App(store=MemoryStore())

    @app.task(queue="email")
    def send_welcome(user_id: int, *, locale: str = "en") -> None: ...

    plain = send_welcome.enqueue(42, locale="fr").job
    assert (plain.task, plain.args, plain.kwargs, plain.queue) == ("send_welcome", [42], {"locale": "fr"}, "email")
    later = send_welcome.options(delay=timedelta(hours=1), idempotency_key="welcome:43").enqueue(43).job
    assert later.status is Status.SCHEDULED and later.idempotency_key == "welcome:43"
    assert send_welcome.options(idempotency_key="welcome:43").enqueue(43).duplicate
    with pytest.raises(ConfigError, match="cannot take these arguments: missing a required argument: 'user_id'"):
        send_welcome.enqueue()
    with pytest.raises(ConfigError, match="cannot take these arguments"):
        send_welcome.enqueue(1, colour="red")
    made = asyncio.run(send_welcome.enqueue_async(44))
    assert app.client.job(made.job.id).args == [44]
    assert asyncio.run(app.enqueue_async("send_welcome", args=[45])).job.args == [45]


def test_a_task_no_app_registered_cannot_enqueue() -> None:
    with pytest.raises(ConfigError, match="not registered with an app"):
        Task(name="loose", fn=lambda: None).enqueue()


def test_a_type_checker_flags_a_wrong_argument_type(tmp_path) -> None:
    example = tmp_path / "typed_example.py"
    example.write_text(TYPED)
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                           str(example)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, done.stdout
    assert 'Argument 1 to "enqueue" of "Task" has incompatible type "str"; expected "int"' in errors[0]
    assert "typed_example.py:11:" in errors[0]


@pytest.mark.parametrize(
    ("options", "phrase"),
    [
        ({"args": "abc"}, "args must be a list"),
        ({"args": {"a": 1}}, "args must be a list"),
        ({"kwargs": [("a", 1)]}, "kwargs must be an object"),
        ({"kwargs": {1: "a"}}, "kwargs must be an object with string keys"),
        ({"max_attempts": 0}, "max_attempts must be an integer of at least 1"),
        ({"queue": ""}, "queue name must be a non-empty string"),
        ({"priority": 1.5}, "priority must be an integer"),
        ({"args": ()}, None),
        ({"kwargs": {}}, None),
    ],
)
def test_a_given_value_is_checked_never_replaced_by_a_default(options: dict, phrase: str | None) -> None:
    app = _welcome_app()
    if phrase is None:  # the empty defaults, given: a job with none
        job = app.enqueue("send_welcome", **options).job
        assert (job.args, job.kwargs) == ([], {})
        return
    with pytest.raises(ConfigError, match=phrase):
        app.enqueue("send_welcome", **options)
    assert app.client.jobs().items == []


@pytest.mark.parametrize(
    ("options", "phrase"),
    [
        ({"queue": ""}, "queue name must be a non-empty string"),
        ({"queue": "a\x00b"}, "contains a NUL character"),
        ({"priority": 70_000}, "priority must be an integer"),
        ({"max_attempts": 0}, "max_attempts must be an integer of at least 1"),
    ],
)
def test_a_task_checks_its_own_options_however_it_is_made(options: dict, phrase: str) -> None:
    """Enqueue takes a task's own options as they are, so a Task made by hand
    (not through ``app.task``) is checked when it is made."""
    with pytest.raises(ConfigError, match=phrase):
        Task(name="by_hand", fn=print, **options)


def _welcome_app() -> App:
    app = App(store=MemoryStore())

    @app.task
    def send_welcome(*args: object, **kwargs: object) -> None: ...

    return app


def test_arguments_past_the_payload_limits_are_refused_at_enqueue() -> None:
    app = _welcome_app()
    deep: list = []
    for _ in range(70):
        deep = [deep]
    with pytest.raises(ArgumentsNotSerializable, match="nested deeper than 64 levels"):
        app.enqueue("send_welcome", args=[deep])
    with pytest.raises(ArgumentsNotSerializable, match="over the limit of 1,000,000"):
        app.enqueue("send_welcome", kwargs={"blob": "x" * 1_000_001})
