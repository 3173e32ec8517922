"""The cache levels a sweep shows: plateaus, knees and DRAM found on hand-made curves whose
levels and falls are known (the numbers below are written by hand, not produced by the code)."""

import pytest

from inferlab.cache_sweep import find_dram, knees, matches, plateaus

KiB, MiB = 1024, 2**20


def curve(pairs):
    return [{"working_set_bytes": ws, "GBps_median": gbps} for ws, gbps in pairs]


# Two points per octave (powers of two and their x1.5 neighbours, for simplicity): L1 200 GB/s up
# to 16 KiB, L2 100 GB/s from 32 KiB to 512 KiB, L3 60 GB/s from 1 MiB to 8 MiB, one point at 12 MiB
# half-way down (30 GB/s), DRAM 15 GB/s from 16 MiB to 128 MiB.
THREE_LEVELS = curve([(4 * KiB, 200), (6 * KiB, 200), (8 * KiB, 200), (12 * KiB, 200), (16 * KiB, 200),
                      (24 * KiB, 140),
                      (32 * KiB, 100), (48 * KiB, 100), (64 * KiB, 100), (128 * KiB, 100), (256 * KiB, 100),
                      (512 * KiB, 100),
                      (1 * MiB, 60), (2 * MiB, 60), (4 * MiB, 60), (8 * MiB, 60),
                      (12 * MiB, 30),
                      (16 * MiB, 15), (32 * MiB, 15), (64 * MiB, 15), (128 * MiB, 15)])


def test_three_levels_and_dram_are_found_with_their_spans():
    found = plateaus(THREE_LEVELS)
    assert [(p["first_bytes"], p["last_bytes"], p["median_GBps"]) for p in found] == [
        (4 * KiB, 16 * KiB, 200), (32 * KiB, 512 * KiB, 100), (1 * MiB, 8 * MiB, 60), (16 * MiB, 128 * MiB, 15)]
    got = [(k["from_bytes"], k["to_bytes"], k["drop"]) for k in knees(THREE_LEVELS)]
    # 200/100 = 2, 100/60 = 1.667, 60/15 = 4; the 24 KiB and 12 MiB points lie inside the falls
    assert got == [(16 * KiB, 32 * KiB, 2.0), (512 * KiB, 1 * MiB, pytest.approx(100 / 60)), (8 * MiB, 16 * MiB, 4.0)]
    dram = find_dram(THREE_LEVELS, private_bytes=1 * MiB)
    assert dram["reached"] and dram["llc_bytes"] == 16 * MiB and dram["plateau"]["median_GBps"] == 15


def test_sysfs_sizes_match_a_knee_within_a_factor_two_of_its_span():
    k = {"from_bytes": 8 * MiB, "to_bytes": 16 * MiB}
    assert matches(4 * MiB, k) and matches(32 * MiB, k)          # [8/2, 2 x 16]
    assert not matches(int(3.9 * MiB), k) and not matches(480 * MiB, k)


def test_noise_a_lone_spike_and_a_lone_dip_do_not_make_levels():
    # L2 at 100 +-10%, one point at 150 (a lone fast point), DRAM at 20 with one dip to 12
    noisy = curve([(64 * KiB, 95), (96 * KiB, 108), (128 * KiB, 150), (192 * KiB, 92), (256 * KiB, 104),
                   (384 * KiB, 99), (512 * KiB, 110), (1 * MiB, 45), (2 * MiB, 20), (3 * MiB, 21),
                   (4 * MiB, 12), (6 * MiB, 19), (8 * MiB, 22), (16 * MiB, 20)])
    found = plateaus(noisy)
    assert [(p["first_bytes"], p["last_bytes"]) for p in found] == [(64 * KiB, 512 * KiB), (2 * MiB, 16 * MiB)]
    # medians 104 (of 92 95 99 104 108 110 150) and 20 (of 12 19 20 20 21 22); the roof is the
    # second-highest point: 110 and 21
    assert [(p["median_GBps"], p["roof_GBps"]) for p in found] == [(104, 110), (20, 21)]
    (knee,) = knees(noisy)
    assert (knee["from_bytes"], knee["to_bytes"]) == (512 * KiB, 2 * MiB)
    assert find_dram(noisy, private_bytes=256 * KiB)["llc_bytes"] == 2 * MiB


def test_a_gradual_fall_is_one_knee():
    # 100 GB/s to 4 MiB, then runs of 70 66 60 57 (median 63) and 45 43 34 (median 43) under an
    # octave each, then 20 from 16 MiB: each run lies over 1.3x below the one before and above the
    # one after, so both are steps of one transition
    gradual = curve([(1 * MiB, 100), (2 * MiB, 100), (4 * MiB, 100), (int(4.8 * MiB), 70), (int(5.7 * MiB), 66),
                     (int(6.7 * MiB), 60), (8 * MiB, 57), (int(9.5 * MiB), 45), (int(11.3 * MiB), 43),
                     (int(13.5 * MiB), 34), (16 * MiB, 20), (32 * MiB, 20), (64 * MiB, 20)])
    assert [(k["from_bytes"], k["to_bytes"]) for k in knees(gradual)] == [(4 * MiB, 16 * MiB)]
    assert find_dram(gradual, private_bytes=1 * MiB)["llc_bytes"] == 16 * MiB


def test_adjacent_plateaus_split_where_least_squares_puts_it():
    # 100 up to 1 MiB, 70 from 1.5 MiB (1.43x): the greedy walk keeps 75 and 76 with the first
    # level (within 1.3x of its median 100), the split at the least-squares boundary does not
    pairs = [(256 * KiB, 100), (512 * KiB, 100), (1 * MiB, 100), (int(1.5 * MiB), 76), (2 * MiB, 75),
             (3 * MiB, 70), (4 * MiB, 70), (6 * MiB, 70)]
    (knee,) = knees(curve(pairs))
    assert (knee["from_bytes"], knee["to_bytes"]) == (1 * MiB, int(1.5 * MiB))


def test_a_rise_is_no_knee():
    # call overhead makes the first points slow: a rise from 110 to 250, then L1's fall to 140
    rising = curve([(4 * KiB, 110), (6 * KiB, 115), (8 * KiB, 250), (12 * KiB, 255), (16 * KiB, 140),
                    (24 * KiB, 141), (32 * KiB, 138)])
    assert [(k["from_bytes"], k["to_bytes"]) for k in knees(rising)] == [(12 * KiB, 16 * KiB)]


@pytest.mark.parametrize("points, reason", [
    # the sweep stops at 8 MiB (the budget): its last plateau is L3, entered by a 1.67x fall
    (THREE_LEVELS[:16], "no fall of 2x or more"),
    # it stops at 16 MiB: one point at DRAM speed is a transition, and the last plateau is L3
    (THREE_LEVELS[:18], "no fall of 2x or more"),
    # it stops at 24 MiB: DRAM's plateau (16-24 MiB) spans 0.58 octave, under one
    (THREE_LEVELS[:18] + curve([(24 * MiB, 15)]), "under 1 octave"),
    # DRAM's 15 GB/s, then two points back at 45 and 50: the second-highest, 45, is within 2x of
    # the 60 before the fall, so no DRAM (a level the budget cut short, not memory)
    (THREE_LEVELS + curve([(256 * MiB, 45), (512 * MiB, 50)]), "climbs back to 45.0 GB/s"),
])
def test_a_sweep_cut_by_the_budget_shows_no_dram(points, reason):
    dram = find_dram(points, private_bytes=1 * MiB)
    assert not dram["reached"] and reason in dram["why"]


def test_dram_figures_that_scatter_under_load_are_still_dram():
    # a loaded run's tail (medians of a quick run here, other processes on the memory bus): 3.0
    # to 6.1 GB/s, 2x apart, but all far under the 36 GB/s before the fall
    loaded = curve([(1 * MiB, 36), (2 * MiB, 37), (4 * MiB, 35), (8 * MiB, 34), (16 * MiB, 25), (32 * MiB, 5.4),
                    (64 * MiB, 3.0), (128 * MiB, 3.0), (256 * MiB, 4.2), (512 * MiB, 6.1), (768 * MiB, 4.6)])
    dram = find_dram(loaded, private_bytes=1 * MiB)
    assert dram["reached"] and dram["llc_bytes"] == 64 * MiB
    # from 64 MiB on: 3.0 3.0 4.2 6.1 4.6, median 4.2, second-highest 4.6
    assert (dram["plateau"]["median_GBps"], dram["plateau"]["roof_GBps"], dram["plateau"]["points"]) == (4.2, 4.6, 5)


def test_a_fall_within_the_private_cache_is_no_dram():
    # a 3x fall at 1-2 MiB, then flat: with a 1 MiB L2 (sysfs) it is the L2's end, not DRAM's
    l2_end = curve([(256 * KiB, 150), (512 * KiB, 150), (1 * MiB, 150), (2 * MiB, 50), (4 * MiB, 50), (8 * MiB, 50)])
    assert not find_dram(l2_end, private_bytes=1 * MiB)["reached"]
    assert find_dram(l2_end, private_bytes=512 * KiB)["reached"]

