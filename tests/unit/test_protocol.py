"""`BSProtocol`: the B/S protocol's phases, selection, held rollouts and checkpoint state, without a trainer."""

import pytest
import torch

from codapo_trl.protocol import PHASE_B, PHASE_S, BSProtocol, PendingBatch


def rows(*names):
    return [{"prompt": name} for name in names]


def test_phases_alternate_every_generation_batch():
    protocol = BSProtocol(sampling=True, micro_steps_per_phase=3, steps_per_phase=2)
    assert [protocol.phase_at(m) for m in range(12)] == [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1]
    # global_step before a phase's first update: two optimizer steps per phase
    assert [protocol.phase_start_step(m) for m in (0, 2, 3, 5, 6, 9)] == [0, 0, 2, 2, 4, 6]
    assert [protocol.is_mid_phase(m) for m in (0, 1, 2, 3, 4)] == [False, True, True, False, True]


def test_without_sampling_every_phase_is_b():
    protocol = BSProtocol(sampling=False, micro_steps_per_phase=2, steps_per_phase=1)
    assert {protocol.enter(m) for m in range(8)} == {PHASE_B}
    assert protocol.phase_start_step(5) == 2  # steps still advance


def test_enter_sets_the_phase():
    protocol = BSProtocol(sampling=True, micro_steps_per_phase=2, steps_per_phase=1)
    assert protocol.phase == PHASE_B
    assert protocol.enter(2) == PHASE_S and protocol.phase == PHASE_S
    assert protocol.enter(4) == PHASE_B and protocol.phase == PHASE_B


def test_a_selection_serves_only_the_s_phase_right_after_its_b_phase():
    protocol = BSProtocol(sampling=True, micro_steps_per_phase=2, steps_per_phase=1)
    assert protocol.selection_for(2) is None  # nothing selected yet
    chosen = rows("q1", "q1")
    protocol.select(chosen, micro_step=4)  # B phase of micro-steps 4-5, global_step 2
    assert protocol.selection_step == 2
    assert protocol.selection_for(6) is chosen and protocol.selection_for(7) is chosen
    assert protocol.selection_for(2) is None  # an earlier S phase
    assert protocol.selection_for(10) is None  # a later pair: the selection is stale


def test_pending_rollouts_are_taken_once():
    protocol = BSProtocol(sampling=True, micro_steps_per_phase=1, steps_per_phase=1)
    assert protocol.take_pending() is None
    batch = PendingBatch(output={"x": torch.ones(2)}, metrics={"m": [1.0]}, logs={})
    protocol.hold(batch)
    assert protocol.take_pending() is batch
    assert protocol.take_pending() is None and protocol.pending is None


def test_state_round_trip_and_a_changed_layout_drops_pending():
    protocol = BSProtocol(sampling=True, micro_steps_per_phase=2, steps_per_phase=1)
    protocol.select(rows("a", "b"), micro_step=0)
    protocol.hold(PendingBatch(output={"x": torch.arange(3), "n": 7}, metrics={}, logs={}))
    state = protocol.state_dict()
    assert state["pending"].output["x"].device.type == "cpu" and state["pending"].output["n"] == 7

    restored = BSProtocol(sampling=True, micro_steps_per_phase=2, steps_per_phase=1)
    restored.load_state_dict(state, micro_step=3)
    assert restored.phase == PHASE_S and restored.selection == rows("a", "b") and restored.selection_step == 0
    assert restored.selection_for(3) == rows("a", "b")
    assert torch.equal(restored.take_pending().output["x"], torch.arange(3))

    other_layout = BSProtocol(sampling=True, micro_steps_per_phase=2, steps_per_phase=1)
    other_layout.load_state_dict(state, micro_step=2, keep_pending=False)
    assert other_layout.pending is None and other_layout.selection_for(2) == rows("a", "b")


def test_a_phase_needs_steps():
    with pytest.raises(ValueError, match="at least one micro-step"):
        BSProtocol(sampling=True, micro_steps_per_phase=0, steps_per_phase=1)
