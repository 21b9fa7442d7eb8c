"""``redrive dead list|show|note|replay|resolve``: triage of the jobs that
failed for good, one letter or every open one a filter matches."""

from __future__ import annotations

import argparse
import json

from redrive import views
from redrive.cli import render
from redrive.cli.load import admin_of
from redrive.cli.parsing import Commands, seconds
from redrive.core.job import LETTER_STATES
from redrive.errors import ConfigError

_FILTERS = ("error_class", "stage", "task", "owner", "older_than", "newer_than")


def add_commands(cli: Commands) -> None:
    dead = cli.group("dead", "Triage, annotate, replay and resolve dead letters.")
    letters = cli.command("list", _list, "List dead letters, newest first.", dead)
    letters.add_argument("--error-class")
    letters.add_argument("--stage")
    letters.add_argument("--task")
    letters.add_argument("--owner")
    letters.add_argument("--state", choices=LETTER_STATES)
    letters.add_argument("--older-than", type=seconds, help="seconds since the last failure")
    letters.add_argument("--newer-than", type=seconds, help="seconds since the last failure")
    letters.add_argument("--limit", type=int, default=50, help="letters per page (default 50)")
    letters.add_argument("--after", help="the cursor a previous page printed, for the next page")
    letters.add_argument("--json", action="store_true", help="one JSON object per line")
    letter = cli.command("show", _show, "Show one dead letter.", dead)
    letter.add_argument("id")
    letter.add_argument("--json", action="store_true")
    note = cli.command("note", _note, "Add a resolution note to a dead letter.", dead)
    note.add_argument("id")
    note.add_argument("text")
    note.add_argument("--by", help="who writes the note (default: your login)")
    replay = cli.command("replay", _replay,
                         "Replay dead letters: their jobs run again from the failed stage. Give ids, or a "
                         "filter for every open letter it matches: redrive dead replay --task X --dry-run.", dead)
    replay.add_argument("ids", nargs="*", metavar="id")
    replay.add_argument("--from-start", action="store_true", help="run every stage again")
    replay.add_argument("--by", help="who replays, for the record (default: your login)")
    resolve = cli.command("resolve", _resolve,
                          "Resolve dead letters: close them without running their jobs again (handled by hand, "
                          "or not worth it). Give ids, or a filter for every open letter it matches: "
                          "redrive dead resolve --task X --note 'refunded by hand' --dry-run.", dead)
    resolve.add_argument("ids", nargs="*", metavar="id")
    resolve.add_argument("--note", help="why, added to each letter as a note")
    resolve.add_argument("--by", help="who resolves, for the record (default: your login)")
    for chooser in (replay, resolve):
        matching = chooser.add_argument_group("every open letter that matches (in batches; one audit entry)")
        matching.add_argument("--error-class")
        matching.add_argument("--stage")
        matching.add_argument("--task")
        matching.add_argument("--owner", help="the job's owner")
        matching.add_argument("--older-than", type=seconds, help="since the last failure: 1h, 7d")
        matching.add_argument("--newer-than", type=seconds, help="since the last failure: 1h, 7d")
        matching.add_argument("--dry-run", action="store_true", help="print how many match, change nothing")


def _list(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        letters = admin.dead_letters(
            error_class=args.error_class, stage=args.stage, task=args.task, owner=args.owner,
            state=args.state, older_than=args.older_than, newer_than=args.newer_than,
            after=args.after, limit=args.limit,
        )
    if args.json:
        render.json_lines(views.dead_letter_view(d) for d in letters)
    else:
        print(f"{'id':>6}  {'task':20}  {'stage':10}  {'error_class':20}  {'state':9}  last failure")
        for d in letters:
            print(f"{d.id:>6}  {d.task[:20]:20}  {(d.stage or '-')[:10]:10}  {d.error_class[:20]:20}  "
                  f"{views.dead_letter_state(d):9}  {d.last_failure_at.isoformat(timespec='seconds')}")
    render.more(letters)
    return 0


def _show(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        letter = admin.dead_letter(args.id)
    shown = views.dead_letter_view(letter)
    if args.json:
        print(json.dumps(shown))
        return 0
    render.record({k: v for k, v in shown.items() if k not in ("last_stack", "notes")})
    for n in letter.notes:
        print(f"note               {n['at']} {n['by'] or '-'}: {n['text']}")
    if letter.last_stack:
        print("last_stack:")
        print(letter.last_stack.rstrip())
    return 0


def _note(args: argparse.Namespace) -> int:
    with admin_of(args) as admin:
        letter = admin.note(args.id, args.text)
    print(f"dead letter {letter.id}: {len(letter.notes)} notes")
    return 0


def _chosen(args: argparse.Namespace) -> bool:
    """True when the command is for every open letter a filter matches, False
    for the ids given; one or the other, never both or neither."""
    filtered = any(getattr(args, name) for name in (*_FILTERS, "dry_run"))
    if args.ids and filtered:
        raise ConfigError("give dead letter ids or a filter (--task, --error-class, --stage, ...), not both")
    if not args.ids and not filtered:
        raise ConfigError("give dead letter ids, or a filter for every open letter it matches "
                          "(--task, --error-class, --stage, --owner, --older-than, --newer-than)")
    return filtered


def _resolve(args: argparse.Namespace) -> int:
    matching = _chosen(args)  # a usage mistake is told before the store is opened
    with admin_of(args) as admin:
        if matching:
            done = admin.resolve_matching(**{name: getattr(args, name) for name in _FILTERS}, note=args.note,
                                          dry_run=args.dry_run)
            render.bulk_told(done, "resolved", "open dead letter")
            return 0
        for resolved in admin.resolve(args.ids, note=args.note):
            letter = resolved.letter
            if resolved.resolved:
                print(f"dead letter {letter.id}: resolved, job {letter.job_id} will not run again")
            else:
                print(f"dead letter {letter.id}: {letter.state} already, nothing done")
    return 0


def _replay(args: argparse.Namespace) -> int:
    if _chosen(args):
        with admin_of(args) as admin:
            done = admin.replay_matching(**{name: getattr(args, name) for name in _FILTERS},
                                         from_start=args.from_start, dry_run=args.dry_run)
        render.bulk_told(done, "replayed", "open dead letter")
        return 0
    with admin_of(args) as admin:
        replays = admin.replay(args.ids, from_start=args.from_start)
    for r in replays:
        if r.job is not None:
            print(f"dead letter {r.letter.id}: job {r.job.id} queued at {r.job.stage or 'the start'}")
        else:
            print(f"dead letter {r.letter.id}: {r.letter.state} already, nothing done")
    return 0
