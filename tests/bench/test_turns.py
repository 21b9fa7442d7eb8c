"""The order the systems take in each repeat of the benchmark: the floors
first, and no system first after them in more than one repeat (the first
place ran slower for the same code: bench/NOTES.md)."""

from __future__ import annotations

from collections import Counter

from bench.__main__ import ALL, FLOORS, turns


def test_each_repeat_runs_every_system_once_and_moves_the_first_place_on() -> None:
    entries = [(object(), name) for name in ALL]
    for repeats in (1, 2, 3, 5):
        orders = [[name for _, name in turns(entries, repeat, repeats)] for repeat in range(repeats)]
        for order in orders:
            assert sorted(order) == sorted(ALL), "every system, once"
            assert set(order[:len(FLOORS)]) == FLOORS, "the floors first"
        firsts = Counter(order[len(FLOORS)] for order in orders)
        assert max(firsts.values()) == 1, firsts
    assert [name for _, name in turns(entries, 0, 3)] == ALL, "the first repeat keeps the order given"
