"""The collector settings of a run (uet.experiments.collector.quiet_collector)."""

from __future__ import annotations

import gc
import weakref

from uet.experiments.collector import YOUNG_THRESHOLD, quiet_collector


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_a_run_freezes_what_exists_and_collects_young_objects_rarely():
    before = gc.get_threshold()
    old = Node()
    old.other = Node()
    old.other.other = old  # a cycle that exists before the run
    ref = weakref.ref(old)
    with quiet_collector():
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_freeze_count() > 0
        del old
        gc.collect()
        assert ref() is not None  # frozen: out of the collector's reach during the run
        young = Node()
        young.other = young
        yref = weakref.ref(young)
        del young
        gc.collect()
        assert yref() is None  # cycles made during the run are still collected
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    gc.collect()
    assert ref() is None  # unfrozen at the end: freed with the next collection
